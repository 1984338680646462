// AdmissionReview v1 shapes and the responses JoinGuard's webhooks give. Only the fields the webhooks read
// or write are typed; the apiserver ignores what is absent.

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';

export interface AdmissionRequest {
  uid: string;
  kind?: { group: string; version: string; kind: string };
  resource?: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  userInfo?: { username?: string; groups?: string[] };
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
}

export interface StatusCause {
  reason: string;
  message: string;
  field: string;
}

export interface AdmissionStatus {
  apiVersion?: 'v1';
  kind?: 'Status';
  status: 'Failure';
  code: number;
  reason: string;
  message: string;
  details?: { group?: string; kind?: string; name?: string; causes?: StatusCause[] };
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  patch?: string;
  patchType?: 'JSONPatch';
  warnings?: string[];
}

export interface AdmissionReview {
  apiVersion: string;
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** One refusal: the field it is about and a message that says what would be accepted. */
export interface FieldProblem {
  field: string;
  message: string;
}

export interface JsonPatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** Parses a request body into an AdmissionReview, or says why it is not one. */
export function parseReview(body: string): { review: AdmissionReview } | { error: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (e) {
    return { error: `body is not JSON: ${(e as Error).message}` };
  }
  if (!isObject(parsed) || parsed['kind'] !== 'AdmissionReview') return { error: 'body is not an AdmissionReview' };
  const request = parsed['request'];
  if (!isObject(request) || typeof request['uid'] !== 'string') return { error: 'AdmissionReview has no request.uid' };
  return { review: parsed as unknown as AdmissionReview };
}

export function allow(uid: string, warnings: string[] = [], patch?: JsonPatchOp[]): AdmissionResponse {
  const r: AdmissionResponse = { uid, allowed: true };
  if (warnings.length > 0) r.warnings = warnings;
  if (patch && patch.length > 0) {
    r.patchType = 'JSONPatch';
    r.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  return r;
}

/**
 * A refusal shaped like apimachinery's `NewInvalid` (422, reason Invalid, one cause per field), so kubectl
 * prints `MachineJoinCheck.joinguard.io "x" is invalid: spec.joinTimeout: ...` as for the CRD schema's own errors.
 */
export function denyInvalid(
  uid: string,
  name: string | undefined,
  problems: FieldProblem[],
  warnings: string[] = [],
): AdmissionResponse {
  const list = problems.map((p) => `${p.field}: ${p.message}`);
  const joined = list.length === 1 ? list[0]! : `[${list.join(', ')}]`;
  const r: AdmissionResponse = {
    uid,
    allowed: false,
    status: {
      status: 'Failure',
      code: 422,
      reason: 'Invalid',
      message: `MachineJoinCheck.joinguard.io ${JSON.stringify(name ?? '')} is invalid: ${joined}`,
      details: {
        group: 'joinguard.io',
        kind: 'MachineJoinCheck',
        ...(name ? { name } : {}),
        causes: problems.map((p) => ({ reason: 'FieldValueInvalid', message: p.message, field: p.field })),
      },
    },
  };
  if (warnings.length > 0) r.warnings = warnings;
  return r;
}

/** A refusal that is not about the object (a lookup failed): 500, so the user knows a retry may pass. */
export function denyInternal(uid: string, message: string): AdmissionResponse {
  return { uid, allowed: false, status: { status: 'Failure', code: 500, reason: 'InternalError', message } };
}

export function reviewOf(apiVersion: string | undefined, response: AdmissionResponse): AdmissionReview {
  return { apiVersion: apiVersion ?? ADMISSION_API_VERSION, kind: 'AdmissionReview', response };
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
