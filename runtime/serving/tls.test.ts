// Serving certificates reloaded from disk: a rotation the way the kubelet does it (a `..data` symlink swap),
// a half-written pair that must not replace a good one, and a stop that leaves nothing running.
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { CertWatcher, loadKeyPair, type KeyPair } from './tls.js';
import { selfSigned } from '../testing/test-certs.js';

const cnOf = (p: KeyPair) => new X509Certificate(p.cert).subject;

describe('runtime/tls: certificate reload', function () {
  this.timeout(20_000);
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'joinguard-tls-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a key that does not belong to the certificate', async () => {
    const a = await selfSigned(dir, 'a');
    const b = await selfSigned(dir, 'b');
    let err: Error | undefined;
    await loadKeyPair(a.cert, b.key).catch((e: Error) => (err = e));
    expect(err, 'mismatched pair').to.exist;
  });

  it('follows a kubelet-style symlink swap and ignores a half-written pair', async () => {
    // <mount>/tls.crt -> ..data/tls.crt, ..data -> ..v1 (what a Secret volume looks like)
    const mount = join(dir, 'mount');
    await mkdir(join(mount, '..v1'), { recursive: true });
    const one = await selfSigned(dir, 'one');
    const two = await selfSigned(dir, 'two');
    await writeFile(join(mount, '..v1', 'tls.crt'), await readFile(one.cert));
    await writeFile(join(mount, '..v1', 'tls.key'), await readFile(one.key));
    await symlink('..v1', join(mount, '..data'));
    await symlink('..data/tls.crt', join(mount, 'tls.crt'));
    await symlink('..data/tls.key', join(mount, 'tls.key'));

    const seen: string[] = [];
    const errors: string[] = [];
    const { watcher, pair } = await CertWatcher.start({
      certFile: join(mount, 'tls.crt'),
      keyFile: join(mount, 'tls.key'),
      pollMs: 200,
      onChange: (p) => seen.push(cnOf(p)),
      onError: (e) => errors.push(e.message),
    });
    try {
      expect(cnOf(pair)).to.equal('CN=one');

      // Half-written: new cert, old key. Must be refused, not served.
      await mkdir(join(mount, '..v2'));
      await writeFile(join(mount, '..v2', 'tls.crt'), await readFile(two.cert));
      await writeFile(join(mount, '..v2', 'tls.key'), await readFile(one.key));
      await symlink('..v2', join(mount, '..data_tmp'));
      await rename(join(mount, '..data_tmp'), join(mount, '..data'));
      await waitFor(() => errors.length > 0);
      expect(seen).to.deep.equal([]);

      // The kubelet finishes the rotation: a new consistent pair.
      await writeFile(join(mount, '..v2', 'tls.key'), await readFile(two.key));
      await waitFor(() => seen.length > 0);
      expect(seen).to.deep.equal(['CN=two']);
    } finally {
      await watcher.stop();
    }
  });
});

async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
