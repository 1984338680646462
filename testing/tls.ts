// The in-memory apiserver's TLS and a kubeconfig that reaches it: a self-signed serving certificate for 127.0.0.1
// that is also the CA clients trust (openssl, runtime/testing/test-certs.ts), shared by the product tests that run
// against the in-memory apiserver and by the benchmarks (bench/micro/). Not the test control plane's helpers
// (hack/testenv/certs.ts): testing/ stands on api/ and runtime/ alone, so no product test reaches hack/ through it.
import fs from 'node:fs';
import path from 'node:path';
import { selfSigned } from '../runtime/testing/test-certs.js';

export interface Tls {
  cert: string;
  key: string;
  caPem: string;
}

/** Also leaves the pair as `<dir>/serving/tls.crt` and `tls.key`: what a controller under test serves with. */
export async function makeTls(dir: string): Promise<Tls> {
  fs.mkdirSync(path.join(dir, 'serving'), { recursive: true });
  const pair = await selfSigned(path.join(dir, 'serving'), 'tls');
  const cert = fs.readFileSync(pair.cert, 'utf8');
  return { cert, key: fs.readFileSync(pair.key, 'utf8'), caPem: cert };
}

export function writeKubeconfig(file: string, server: string, caPem: string): string {
  fs.writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    server: ${server}`,
      `    certificate-authority-data: ${Buffer.from(caPem).toString('base64')}`,
      'users:',
      '- name: joinguard',
      '  user:',
      '    token: micro-bench',
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: joinguard',
      'current-context: fake',
      '',
    ].join('\n'),
  );
  return file;
}
