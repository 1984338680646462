// The readers of CAPI objects, in one place: raw JSON of either CAPI API version in, the internal
// model (model.ts) out, MalformedObjectError (naming the field) for what cannot be understood.
export { readMachine, readOwner, skipReason, REASON_CONNECTION_DOWN } from './machine.js';
export { readCluster } from './cluster.js';
export { readKubeadmControlPlane } from './control-plane.js';
export { readBootstrapConfig } from './bootstrap.js';
export { readMachineSet } from './machine-set.js';
export { readMachineHealthCheck, readSelector } from './machine-health-check.js';
export { matchesSelector } from './selector.js';
export { MalformedObjectError } from './model.js';
