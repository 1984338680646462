// Kubernetes' label syntax (apimachinery validation.IsQualifiedName / IsValidLabelValue), checked in code
// because a CRD schema cannot constrain map keys, and shared with the schema's patterns for the rest.

export const LABEL_NAME_MAX_LENGTH = 63;
export const LABEL_PREFIX_MAX_LENGTH = 253;

const NAME = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const DNS1123_SUBDOMAIN = '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*';

/** A label key: an optional DNS subdomain prefix and `/`, then a name. Lengths are checked apart. */
export const LABEL_KEY_PATTERN = `^(${DNS1123_SUBDOMAIN}/)?${NAME}$`;
/** A label value: empty, or a name. */
export const LABEL_VALUE_PATTERN = `^(${NAME})?$`;
/**
 * A Cluster's name: a DNS-1123 subdomain (the apiserver's rule for every custom resource's name) that is also a
 * label value (CAPI's Cluster webhook refuses other names), so at most 63 characters (CLUSTER_NAME_MAX_LENGTH).
 */
export const CLUSTER_NAME_PATTERN = `^${DNS1123_SUBDOMAIN}$`;

const NAME_RE = new RegExp(`^${NAME}$`);
const PREFIX_RE = new RegExp(`^${DNS1123_SUBDOMAIN}$`);
const VALUE_RE = new RegExp(LABEL_VALUE_PATTERN);

/** Why `key` is not a label key, or undefined when it is one. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix === '') return 'has an empty prefix before "/"';
    if (prefix.length > LABEL_PREFIX_MAX_LENGTH)
      return `has a prefix longer than ${LABEL_PREFIX_MAX_LENGTH} characters`;
    if (!PREFIX_RE.test(prefix))
      return 'has a prefix that is not a DNS subdomain (lower-case letters, digits, "-" and ".")';
  }
  if (name === '') return 'needs a name (e.g. "cluster.x-k8s.io/deployment-name")';
  if (name.length > LABEL_NAME_MAX_LENGTH) return `has a name longer than ${LABEL_NAME_MAX_LENGTH} characters`;
  if (!NAME_RE.test(name)) {
    return 'has a name that is not letters, digits, "-", "_" and ".", starting and ending with a letter or digit';
  }
  return undefined;
}

/** Why `value` is not a label value, or undefined when it is one. */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > LABEL_NAME_MAX_LENGTH) return `is longer than ${LABEL_NAME_MAX_LENGTH} characters`;
  if (!VALUE_RE.test(value)) {
    return 'must be empty or letters, digits, "-", "_" and ".", starting and ending with a letter or digit';
  }
  return undefined;
}
