// TLS for the servers JoinGuard runs (diagnostics and webhooks): CAPI's --tls-min-version and
// --tls-cipher-suites (Go's names, as k8s.io/component-base/cli/flag reads them) turned into Node's options,
// and the self-signed certificate controller-runtime's metrics server falls back to when it has no files.
//
// The certificate is made here (ECDSA P-256, X.509 v3 in DER by hand, signed with node:crypto) rather than by
// a library: `selfsigned` (the common choice) took 130-260 ms and +17 MiB RSS to import against ~1 ms and
// 0.2 MiB, and 6-8 ms per certificate against 0.4 ms
// (docs/decisions/operating-metrics-diagnostics-flags-logs.md, "Diagnostics").
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';
import type { SecureContextOptions } from 'node:tls';

const TLS_VERSIONS = {
  VersionTLS10: 'TLSv1',
  VersionTLS11: 'TLSv1.1',
  VersionTLS12: 'TLSv1.2',
  VersionTLS13: 'TLSv1.3',
} as const;
export type TlsVersionName = keyof typeof TLS_VERSIONS;
export const TLS_VERSION_NAMES = Object.keys(TLS_VERSIONS) as TlsVersionName[];

// Go's cipher suite names -> OpenSSL's. TLS 1.3 suites are not configurable in Go (listed names are ignored),
// so they map to nothing here either; Node keeps its TLS 1.3 defaults.
const TLS13 = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];
/** Go's secure suites (component-base's "preferred" values). */
const PREFERRED: Record<string, string> = {
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: 'ECDHE-ECDSA-AES128-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: 'ECDHE-ECDSA-AES256-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: 'ECDHE-RSA-AES128-SHA',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: 'ECDHE-RSA-AES256-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
};
/** Legacy spellings component-base keeps; accepted, not listed (as in CAPI's --help). */
const LEGACY: Record<string, string> = {
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: 'ECDHE-ECDSA-CHACHA20-POLY1305',
};
/** Go's "insecure" suites that Node's OpenSSL still has: accepted as component-base accepts them. */
const INSECURE: Record<string, string> = {
  TLS_RSA_WITH_AES_128_CBC_SHA: 'AES128-SHA',
  TLS_RSA_WITH_AES_256_CBC_SHA: 'AES256-SHA',
  TLS_RSA_WITH_AES_128_CBC_SHA256: 'AES128-SHA256',
  TLS_RSA_WITH_AES_128_GCM_SHA256: 'AES128-GCM-SHA256',
  TLS_RSA_WITH_AES_256_GCM_SHA384: 'AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: 'ECDHE-ECDSA-AES128-SHA256',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: 'ECDHE-RSA-AES128-SHA256',
};
/**
 * Go's insecure suites Node's OpenSSL 3 does not have (RC4, 3DES): OpenSSL answers "no cipher match" when the
 * server starts, so they are refused with the flags, and --help does not offer them.
 */
const UNAVAILABLE = new Set([
  'TLS_RSA_WITH_RC4_128_SHA',
  'TLS_RSA_WITH_3DES_EDE_CBC_SHA',
  'TLS_ECDHE_ECDSA_WITH_RC4_128_SHA',
  'TLS_ECDHE_RSA_WITH_RC4_128_SHA',
  'TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA',
]);
const CIPHERS: Record<string, string> = { ...PREFERRED, ...LEGACY, ...INSECURE };
/** What --help lists, as CAPI's does: the preferred values, then the insecure ones that are accepted. */
export const PREFERRED_CIPHER_SUITE_NAMES = [...TLS13, ...Object.keys(PREFERRED)].sort();
export const INSECURE_CIPHER_SUITE_NAMES = Object.keys(INSECURE).sort();
/** Every name accepted (the lists above and the legacy spellings), each with its OpenSSL name ('' for TLS 1.3). */
export const ACCEPTED_CIPHER_SUITES: Readonly<Record<string, string>> = {
  ...Object.fromEntries(TLS13.map((n) => [n, ''])),
  ...CIPHERS,
};

export interface ServingTls {
  minVersion: SecureContextOptions['minVersion'];
  /** OpenSSL cipher string; undefined keeps Node's defaults. */
  ciphers?: string;
  /** --tls-curve-preferences as OpenSSL group names (`X25519:P-256`); undefined keeps Node's defaults. */
  ecdhCurve?: string;
}

/** --tls-min-version and --tls-cipher-suites as Node options; throws on a name Go would not accept. */
export function servingTls(minVersion: string, cipherSuites: string[]): ServingTls {
  const v = TLS_VERSIONS[(minVersion || 'VersionTLS12') as TlsVersionName];
  if (!v) throw new Error(`unknown tls version ${JSON.stringify(minVersion)} (one of ${TLS_VERSION_NAMES.join(', ')})`);
  if (cipherSuites.length === 0) return { minVersion: v };
  const tls12: string[] = [];
  for (const name of cipherSuites) {
    if (TLS13.includes(name)) continue;
    if (UNAVAILABLE.has(name))
      throw new Error(`cipher suite ${name} is not available: Node's OpenSSL has no RC4 or 3DES`);
    const openssl = CIPHERS[name];
    if (!openssl) throw new Error(`cipher suite ${name} not supported or doesn't exist`);
    tls12.push(openssl);
  }
  // TLS 1.3 first (always on, as in Go), then the chosen TLS 1.2 suites; none chosen means no TLS 1.2.
  return { minVersion: v, ciphers: [...TLS13, ...tls12].join(':') };
}

// ---- a self-signed serving certificate ----

function tlv(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const n = body.length;
  let len = [0x82, n >> 8, n & 0xff];
  if (n < 0x100) len = [0x81, n];
  if (n < 0x80) len = [n];
  return Buffer.concat([Buffer.from([tag, ...len]), body]);
}
const seq = (...parts: Buffer[]) => tlv(0x30, ...parts);
const int = (b: Buffer) => tlv(0x02, b);
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer) => tlv(0x03, Buffer.from([0]), b);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]];
  const out = [40 * a + b];
  for (let v of rest) {
    const base128 = [v & 0x7f];
    while ((v = Math.floor(v / 128)) > 0) base128.unshift((v & 0x7f) | 0x80);
    out.push(...base128);
  }
  return tlv(0x06, Buffer.from(out));
}

const generalizedTime = (d: Date) =>
  tlv(
    0x18,
    Buffer.from(
      `${d
        .toISOString()
        .replace(/[-:T]|\.\d+/g, '')
        .slice(0, 14)}Z`,
    ),
  );

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const halves = ip.split('::');
  const words = (s: string | undefined) => (s ? s.split(':') : []);
  const head = words(halves[0]);
  const tail = words(halves[1]);
  const all = halves.length === 2 ? [...head, ...Array(8 - head.length - tail.length).fill('0'), ...tail] : head;
  return Buffer.concat(all.map((w) => Buffer.from(w.padStart(4, '0'), 'hex')));
}

const extension = (id: string, critical: boolean, value: Buffer) =>
  seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), octets(value));

/**
 * A self-signed serving certificate (ECDSA P-256, SHA-256) for `host` with the given IP and DNS names, as
 * controller-runtime makes one for its metrics server (client-go's GenerateSelfSignedCertKey: "localhost",
 * 127.0.0.1, one year). PEM, PKCS#8 key.
 */
export function selfSignedCertificate(o: { host: string; ips?: string[]; dnsNames?: string[]; days?: number }): {
  cert: string;
  key: string;
} {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecdsaWithSha256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from(o.host)))));
  const serial = randomBytes(16);
  serial[0]! &= 0x7f; // a positive INTEGER
  serial[0]! |= 0x01; // with no leading zero byte
  const notBefore = new Date(Date.now() - 60 * 60_000);
  const notAfter = new Date(notBefore.getTime() + (o.days ?? 365) * 86_400_000);
  const dns = [...new Set([o.host, ...(o.dnsNames ?? [])].filter((h) => isIP(h) === 0))];
  const ips = [...new Set([...(isIP(o.host) ? [o.host] : []), ...(o.ips ?? [])])];
  const san = seq(...dns.map((d) => tlv(0x82, Buffer.from(d))), ...ips.map((ip) => tlv(0x87, ipBytes(ip))));
  const extensions = tlv(
    0xa3,
    seq(
      extension('2.5.29.15', true, tlv(0x03, Buffer.from([0x07, 0x80]))), // keyUsage: digitalSignature (7 unused bits)
      extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))), // extKeyUsage: serverAuth
      extension('2.5.29.19', true, seq()), // basicConstraints: not a CA
      extension('2.5.29.17', false, san),
    ),
  );
  const tbs = seq(
    tlv(0xa0, int(Buffer.from([2]))), // v3
    int(serial),
    ecdsaWithSha256,
    name,
    seq(generalizedTime(notBefore), generalizedTime(notAfter)),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const der = seq(tbs, ecdsaWithSha256, bits(sign('sha256', tbs, privateKey)));
  const b64 = der
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n');
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}
