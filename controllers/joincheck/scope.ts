// Which Machines a check looks at. A check watches the Machines of one Cluster in its own namespace that
// match its selector, like a MachineHealthCheck; some rules (the first control-plane Machine, "no
// control-plane Machine left") look at every Machine of the Cluster, so both sets are offered.
import type { LabelSelectorModel, MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings } from '../../api/v1alpha1/types.js';

/** Kubernetes label-selector semantics: an empty selector matches everything; NotIn matches an absent key. */
export function matchesSelector(labels: Record<string, string>, selector: LabelSelectorModel): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(labels[e.key] as string)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(labels[e.key] as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        // An operator the reader did not vet: match nothing rather than too much.
        return false;
    }
  }
  return true;
}

export function byName<T extends { name: string }>(a: T, b: T): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Every Machine of the check's Cluster in the check's namespace, sorted by name. */
export function clusterMachines(machines: MachineFacts[], settings: CheckSettings, namespace: string): MachineFacts[] {
  return machines
    .filter((m) => m.clusterName === settings.clusterName && m.namespace === namespace)
    .sort(byName);
}

/** The Machines the check judges: the Cluster's Machines its selector matches. */
export function machinesInScope(ofCluster: MachineFacts[], settings: CheckSettings): MachineFacts[] {
  return ofCluster.filter((m) => matchesSelector(m.labels, settings.selector));
}

/** expectedMachines: in scope and not being deleted. */
export function expectedMachines(inScope: MachineFacts[]): number {
  return inScope.filter((m) => m.deletingSince === undefined).length;
}
