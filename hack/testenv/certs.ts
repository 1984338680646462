// Certificates of the test control plane, made with the openssl CLI.
//
// One CA signs the apiserver's serving cert, the admin client cert and the CAPI managers' webhook
// serving cert. The same CA is what tests hand to KCP as a workload cluster's `<cluster>-ca`, so a
// kubeconfig KCP generates from it authenticates against this very apiserver.
// Keys are RSA 2048 in PKCS#1 ("RSA PRIVATE KEY"): every consumer (apiserver, controller-runtime,
// CAPI's certs.DecodePrivateKeyPEM, Node's TLS, kubectl) reads that form.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const OPENSSL = process.env.JOINGUARD_OPENSSL ?? '/usr/bin/openssl';
const DAYS = '365';

export interface KeyPair {
  certFile: string;
  keyFile: string;
}

export interface CertSet {
  dir: string;
  ca: KeyPair;
  caCertPem: string;
  caKeyPem: string;
  apiserver: KeyPair;
  admin: KeyPair;
  /** Service-account token signing key and its public key (for --service-account-key-file). */
  serviceAccountKeyFile: string;
  serviceAccountPubFile: string;
  /** Folder with tls.crt and tls.key, the names the CAPI managers look for by default. */
  webhookCertDir: string;
}

export interface LeafRequest {
  commonName: string;
  organization?: string;
  /** Entries like `IP:127.0.0.1` or `DNS:localhost`. */
  subjectAltNames?: string[];
  usage: 'server' | 'client';
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run(OPENSSL, args, { timeout: 30_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args[0]} failed: ${e.stderr?.trim() || e.message}`);
  }
}

async function genKey(keyFile: string): Promise<void> {
  await openssl(['genrsa', '-traditional', '-out', keyFile, '2048']);
  fs.chmodSync(keyFile, 0o600);
}

function requestConfig(subject: Record<string, string>, ext: string[]): string {
  const dn = Object.entries(subject).map(([k, v]) => `${k} = ${v}`);
  return [
    '[req]',
    'distinguished_name = dn',
    'prompt = no',
    'x509_extensions = ext',
    '[dn]',
    ...dn,
    '[ext]',
    ...ext,
    '',
  ].join('\n');
}

/** A self-signed CA in dir/<name>.crt and dir/<name>.key. */
export async function makeCA(dir: string, name: string, commonName: string): Promise<KeyPair> {
  const pair = { certFile: path.join(dir, `${name}.crt`), keyFile: path.join(dir, `${name}.key`) };
  const cnf = path.join(dir, `${name}.cnf`);
  fs.writeFileSync(
    cnf,
    requestConfig({ CN: commonName }, [
      'basicConstraints = critical,CA:TRUE',
      'keyUsage = critical,keyCertSign,cRLSign,digitalSignature',
      'subjectKeyIdentifier = hash',
    ]),
  );
  await genKey(pair.keyFile);
  await openssl([
    'req',
    '-x509',
    '-new',
    '-config',
    cnf,
    '-key',
    pair.keyFile,
    '-days',
    DAYS,
    '-sha256',
    '-out',
    pair.certFile,
  ]);
  fs.rmSync(cnf);
  return pair;
}

/** A leaf certificate signed by ca, written to certFile/keyFile. */
export async function issueCert(ca: KeyPair, req: LeafRequest, certFile: string, keyFile: string): Promise<KeyPair> {
  const subject: Record<string, string> = {};
  if (req.organization) subject.O = req.organization;
  subject.CN = req.commonName;
  const ext = [
    'basicConstraints = critical,CA:FALSE',
    'keyUsage = critical,digitalSignature,keyEncipherment',
    `extendedKeyUsage = ${req.usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
    'subjectKeyIdentifier = hash',
    'authorityKeyIdentifier = keyid',
  ];
  if (req.subjectAltNames?.length) ext.push(`subjectAltName = ${req.subjectAltNames.join(',')}`);
  const cnf = `${certFile}.cnf`;
  fs.writeFileSync(cnf, requestConfig(subject, ext));
  await genKey(keyFile);
  await openssl([
    'req',
    '-x509',
    '-new',
    '-config',
    cnf,
    '-key',
    keyFile,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-days',
    DAYS,
    '-sha256',
    '-out',
    certFile,
  ]);
  fs.rmSync(cnf);
  return { certFile, keyFile };
}

/**
 * A serving cert for a webhook or any other local TLS server, signed by the env's CA (for tests that
 * serve their own webhooks: register caCertPem as the caBundle). Writes dir/tls.crt and dir/tls.key.
 */
export async function issueServingCert(
  caCertFile: string,
  caKeyFile: string,
  dir: string,
  sans = ['IP:127.0.0.1', 'DNS:localhost'],
): Promise<KeyPair> {
  fs.mkdirSync(dir, { recursive: true });
  return issueCert(
    { certFile: caCertFile, keyFile: caKeyFile },
    { commonName: 'testenv-serving', subjectAltNames: sans, usage: 'server' },
    path.join(dir, 'tls.crt'),
    path.join(dir, 'tls.key'),
  );
}

/** Everything the control plane needs, under dir. */
export async function makeCertSet(dir: string): Promise<CertSet> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = await makeCA(dir, 'ca', 'joinguard-testenv-ca');
  const webhookCertDir = path.join(dir, 'webhook');
  fs.mkdirSync(webhookCertDir, { recursive: true });
  const serviceAccountKeyFile = path.join(dir, 'sa.key');
  const serviceAccountPubFile = path.join(dir, 'sa.pub');
  const [apiserver, admin] = await Promise.all([
    issueCert(
      ca,
      {
        commonName: 'kube-apiserver',
        // 10.0.0.1 is the `kubernetes` Service IP of --service-cluster-ip-range=10.0.0.0/24.
        subjectAltNames: [
          'IP:127.0.0.1',
          'IP:10.0.0.1',
          'DNS:localhost',
          'DNS:kubernetes',
          'DNS:kubernetes.default',
          'DNS:kubernetes.default.svc',
          'DNS:kubernetes.default.svc.cluster.local',
        ],
        usage: 'server',
      },
      path.join(dir, 'apiserver.crt'),
      path.join(dir, 'apiserver.key'),
    ),
    issueCert(
      ca,
      { commonName: 'admin', organization: 'system:masters', usage: 'client' },
      path.join(dir, 'admin.crt'),
      path.join(dir, 'admin.key'),
    ),
    issueCert(
      ca,
      { commonName: 'capi-webhook', subjectAltNames: ['IP:127.0.0.1', 'DNS:localhost'], usage: 'server' },
      path.join(webhookCertDir, 'tls.crt'),
      path.join(webhookCertDir, 'tls.key'),
    ),
    genKey(serviceAccountKeyFile).then(() =>
      openssl(['rsa', '-in', serviceAccountKeyFile, '-pubout', '-out', serviceAccountPubFile]),
    ),
  ]);
  return {
    dir,
    ca,
    caCertPem: fs.readFileSync(ca.certFile, 'utf8'),
    caKeyPem: fs.readFileSync(ca.keyFile, 'utf8'),
    apiserver,
    admin,
    serviceAccountKeyFile,
    serviceAccountPubFile,
    webhookCertDir,
  };
}
