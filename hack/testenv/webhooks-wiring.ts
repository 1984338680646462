// Points CAPI's webhooks at managers that run as local processes, the way CAPI's own test envtest does
// (internal/test/envtest): every CRD gets its conversion webhook and every mutating/validating webhook
// of a provider's config/webhook/manifests.yaml gets `url: https://127.0.0.1:<port>/<path>` and the CA
// bundle instead of a Service. Unlike CAPI's envtest, which serves all webhooks from one in-process
// manager, each provider here has its own manager and port, so each object goes to its owner.
// Names and labels follow what the providers' kustomize builds produce in a real install.
import fs from 'node:fs';
import { parseAllDocuments } from 'yaml';

/** Where one provider's webhooks are served, and how a real install names and labels its objects. */
export interface WebhookTarget {
  /** Manager component name, for messages. */
  component: string;
  port: number;
  /** API groups whose CRDs this provider owns (their conversion webhook goes to it). */
  crdGroups: string[];
  /** The provider's config/webhook/manifests.yaml. */
  manifestsFile: string;
  /** kustomize namePrefix of the provider (`capi-`, `capi-kubeadm-bootstrap-`, ...). */
  namePrefix: string;
  /** Labels the provider's kustomize build puts on its CRDs. */
  crdLabels: Record<string, string>;
}

type Json = Record<string, any>;

/** The label of every webhook configuration the test env wires (a release upgrade deletes those it replaced). */
export const TESTENV_LABEL = 'joinguard.io/testenv';

function targetFor(targets: WebhookTarget[], group: string): WebhookTarget | undefined {
  return targets.find((t) => t.crdGroups.includes(group));
}

/**
 * Returns the CRD with its conversion webhook pointed at the owning provider's manager and the labels
 * of a real install. CRDs of groups no provider owns are returned unchanged.
 */
export function wireCrd(crd: Json, targets: WebhookTarget[], caBundleB64: string): Json {
  const group = crd.spec?.group as string;
  const target = targetFor(targets, group);
  if (!target) return crd;
  const wired = structuredClone(crd);
  wired.metadata.labels = { ...(wired.metadata.labels ?? {}), ...target.crdLabels };
  // All CAPI CRDs serve several versions with v1beta2 stored; conversion is what makes v1beta1 work.
  if ((wired.spec.versions ?? []).length > 1 && !wired.spec.preserveUnknownFields) {
    wired.spec.conversion = {
      strategy: 'Webhook',
      webhook: {
        conversionReviewVersions: ['v1'],
        clientConfig: { url: `https://127.0.0.1:${target.port}/convert`, caBundle: caBundleB64 },
      },
    };
  }
  return wired;
}

function localClientConfig(clientConfig: Json | undefined, port: number, caBundleB64: string, where: string): Json {
  const servicePath = clientConfig?.service?.path as string | undefined;
  if (!servicePath) throw new Error(`${where}: webhook without service.path in manifests`);
  const path = servicePath.startsWith('/') ? servicePath : `/${servicePath}`;
  return { url: `https://127.0.0.1:${port}${path}`, caBundle: caBundleB64 };
}

/** The provider's Mutating/ValidatingWebhookConfigurations, wired to its local manager. */
export function webhookConfigurations(target: WebhookTarget, caBundleB64: string): Json[] {
  const text = fs.readFileSync(target.manifestsFile, 'utf8');
  const out: Json[] = [];
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as Json | null;
    if (!obj || (obj.kind !== 'MutatingWebhookConfiguration' && obj.kind !== 'ValidatingWebhookConfiguration'))
      continue;
    const name = `${target.namePrefix}${obj.metadata.name}`;
    out.push({
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      metadata: { name, labels: { [TESTENV_LABEL]: 'true' } },
      webhooks: (obj.webhooks as Json[]).map((w) => ({
        ...w,
        clientConfig: localClientConfig(w.clientConfig, target.port, caBundleB64, `${name}/${w.name}`),
      })),
    });
  }
  if (out.length === 0) throw new Error(`${target.manifestsFile}: no webhook configurations found`);
  return out;
}

/** REST collection path of a webhook configuration kind. */
export function webhookConfigurationPath(kind: string): string {
  const plural =
    kind === 'MutatingWebhookConfiguration' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations';
  return `/apis/admissionregistration.k8s.io/v1/${plural}`;
}
