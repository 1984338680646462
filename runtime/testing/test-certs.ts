// Test-only: a self-signed serving certificate for 127.0.0.1, made with the openssl CLI.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function selfSigned(dir: string, cn: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, `${cn}.crt`);
  const key = join(dir, `${cn}.key`);
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-keyout',
    key,
    '-out',
    cert,
  ]);
  return { cert, key };
}
