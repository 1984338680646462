// metav1.LabelSelector semantics (apimachinery labels.Selector): every requirement must hold; an empty
// selector matches everything (as CAPI's MachineHealthCheck reads its own); NotIn and DoesNotExist
// hold for a missing label.
import type { LabelSelectorModel } from './model.js';

export function matchesSelector(sel: LabelSelectorModel, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) {
    if (labels[k] !== v) return false;
  }
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(labels[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(labels[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        // An operator apimachinery would refuse selects nothing, never everything.
        return false;
    }
  }
  return true;
}
