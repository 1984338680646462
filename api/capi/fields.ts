// Where each fact JoinGuard reads lives, per CAPI API version: one table, so the readers never branch on the
// version. Typed as a Record over CapiApiVersion, so a new API version is a compile error here until every
// path of it is written down, instead of a silent fall-through to another version's fields.
//
// v1beta2: sigs.k8s.io/cluster-api/api v1.14.2 (core/v1beta2, controlplane/kubeadm/v1beta2).
// v1beta1: as CAPI v1.9/v1.10 serve it (sigs.k8s.io/cluster-api v1.10.10 api/v1beta1,
// controlplane/kubeadm/api/v1beta1): the owners (MachineSet, KCP: collections.IsUnhealthyAndOwnerRemediated
// over util/conditions) read CAPI's v1beta1 Conditions in status.conditions; the v1beta2-style conditions
// that carry the clock (InfrastructureReady, BootstrapConfigReady, ControlPlaneInitialized) and the workload
// connection (RemoteConnectionProbe, NodeReady/NodeHealthy reason ConnectionDown) are under status.v1beta2.
import { DurationError, parseDuration } from '../v1alpha1/duration.js';
import { readConditions, timedFact, type ParsedCondition } from './conditions.js';
import type { CapiApiVersion, TimedFact } from './model.js';
import type { ObjectReader } from './reader.js';
import { groupOf } from './resources.js';

type Path = string;

/** A condition of a type in the list at `list`. */
export interface CondAt {
  list: Path;
  type: string;
}

/** The group of a reference: v1beta2 references carry apiGroup, v1beta1 corev1.ObjectReferences apiVersion. */
export type RefGroup = { apiGroup: Path } | { apiVersion: Path };

/** A period: v1beta2 integer seconds, v1beta1 a metav1.Duration string. */
export type Period = { seconds: Path } | { duration: Path };

export interface CapiFields {
  machine: {
    /**
     * The list the owners read for CAPI's remediation contract (HealthCheckSucceeded, OwnerRemediated) and
     * JoinGuardJoined.
     */
    ownerConditions: Path;
    /** Where the owners write their answer (OwnerRemediated's reason): the first present wins. */
    ownerAnswer: CondAt[];
    /**
     * metav1.Condition lists with NodeReady/NodeHealthy (reason ConnectionDown: the workload cluster is not reachable).
     */
    connectionConditions: Path;
    /** v1beta1 only: NodeHealthy=Unknown with this reason in ownerConditions means the Node could not be looked up. */
    nodeInspectionFailed?: CondAt & { reason: string };
    /** The boolean, then the conditions that time it (first present wins). */
    infrastructureReady: { flag: Path; conditions: CondAt[] };
    bootstrapReady: { flag: Path; conditions: CondAt[] };
    configRefGroup: RefGroup;
  };
  cluster: {
    controlPlaneInitialized: { flag: Path; conditions: CondAt[] };
    infrastructureReady: { flag: Path; conditions: CondAt[] };
    remoteConnectionProbe: CondAt;
    controlPlaneRefGroup: RefGroup;
  };
  kubeadmControlPlane: {
    initialized: Path;
    maxRetry: Path;
    retryPeriod: Period;
    minHealthyPeriod: Period;
  };
  machineHealthCheck: {
    unhealthyMachineConditions: Path;
    nodeStartupTimeout: Period;
  };
}

const V1BETA2_CONDITIONS = 'status.conditions';
const V1BETA1_CONDITIONS = 'status.conditions';
const V1BETA1_V1BETA2_CONDITIONS = 'status.v1beta2.conditions';

export const CAPI_FIELDS: Record<CapiApiVersion, CapiFields> = {
  v1beta2: {
    machine: {
      ownerConditions: V1BETA2_CONDITIONS,
      ownerAnswer: [{ list: V1BETA2_CONDITIONS, type: 'OwnerRemediated' }],
      connectionConditions: V1BETA2_CONDITIONS,
      infrastructureReady: {
        flag: 'status.initialization.infrastructureProvisioned',
        conditions: [{ list: V1BETA2_CONDITIONS, type: 'InfrastructureReady' }],
      },
      bootstrapReady: {
        flag: 'status.initialization.bootstrapDataSecretCreated',
        conditions: [{ list: V1BETA2_CONDITIONS, type: 'BootstrapConfigReady' }],
      },
      configRefGroup: { apiGroup: 'spec.bootstrap.configRef.apiGroup' },
    },
    cluster: {
      controlPlaneInitialized: {
        flag: 'status.initialization.controlPlaneInitialized',
        conditions: [{ list: V1BETA2_CONDITIONS, type: 'ControlPlaneInitialized' }],
      },
      infrastructureReady: {
        flag: 'status.initialization.infrastructureProvisioned',
        conditions: [{ list: V1BETA2_CONDITIONS, type: 'InfrastructureReady' }],
      },
      remoteConnectionProbe: { list: V1BETA2_CONDITIONS, type: 'RemoteConnectionProbe' },
      controlPlaneRefGroup: { apiGroup: 'spec.controlPlaneRef.apiGroup' },
    },
    kubeadmControlPlane: {
      initialized: 'status.initialization.controlPlaneInitialized',
      maxRetry: 'spec.remediation.maxRetry',
      retryPeriod: { seconds: 'spec.remediation.retryPeriodSeconds' },
      minHealthyPeriod: { seconds: 'spec.remediation.minHealthyPeriodSeconds' },
    },
    machineHealthCheck: {
      unhealthyMachineConditions: 'spec.checks.unhealthyMachineConditions',
      nodeStartupTimeout: { seconds: 'spec.checks.nodeStartupTimeoutSeconds' },
    },
  },
  v1beta1: {
    machine: {
      ownerConditions: V1BETA1_CONDITIONS,
      // v1.9/v1.10 owners write RemediationDeferred, CannotBeRemediated and MachineDeleting only into the v1beta2
      // list (v1.10.10 machineset_controller.go patchMachineConditions, KCP remediation.go); v1beta1's keeps
      // WaitingForRemediation or says True. v1beta1's is read only while the v1beta2 list has no answer.
      ownerAnswer: [
        { list: V1BETA1_V1BETA2_CONDITIONS, type: 'OwnerRemediated' },
        { list: V1BETA1_CONDITIONS, type: 'OwnerRemediated' },
      ],
      connectionConditions: V1BETA1_V1BETA2_CONDITIONS,
      nodeInspectionFailed: { list: V1BETA1_CONDITIONS, type: 'NodeHealthy', reason: 'NodeInspectionFailed' },
      infrastructureReady: {
        flag: 'status.infrastructureReady',
        conditions: [
          { list: V1BETA1_CONDITIONS, type: 'InfrastructureReady' },
          { list: V1BETA1_V1BETA2_CONDITIONS, type: 'InfrastructureReady' },
        ],
      },
      bootstrapReady: {
        flag: 'status.bootstrapReady',
        conditions: [
          { list: V1BETA1_CONDITIONS, type: 'BootstrapReady' },
          { list: V1BETA1_V1BETA2_CONDITIONS, type: 'BootstrapConfigReady' },
        ],
      },
      configRefGroup: { apiVersion: 'spec.bootstrap.configRef.apiVersion' },
    },
    cluster: {
      // status.controlPlaneReady: "never updated after provisioning is completed" — v1beta1's initialized flag.
      controlPlaneInitialized: {
        flag: 'status.controlPlaneReady',
        conditions: [
          { list: V1BETA1_CONDITIONS, type: 'ControlPlaneInitialized' },
          { list: V1BETA1_V1BETA2_CONDITIONS, type: 'ControlPlaneInitialized' },
        ],
      },
      infrastructureReady: {
        flag: 'status.infrastructureReady',
        conditions: [{ list: V1BETA1_CONDITIONS, type: 'InfrastructureReady' }],
      },
      remoteConnectionProbe: { list: V1BETA1_V1BETA2_CONDITIONS, type: 'RemoteConnectionProbe' },
      controlPlaneRefGroup: { apiVersion: 'spec.controlPlaneRef.apiVersion' },
    },
    kubeadmControlPlane: {
      initialized: 'status.initialized',
      maxRetry: 'spec.remediationStrategy.maxRetry',
      retryPeriod: { duration: 'spec.remediationStrategy.retryPeriod' },
      minHealthyPeriod: { duration: 'spec.remediationStrategy.minHealthyPeriod' },
    },
    machineHealthCheck: {
      // Absent before v1.12 (not in v1.10's v1beta1 types): reads as no conditions, as it should.
      unhealthyMachineConditions: 'spec.unhealthyMachineConditions',
      nodeStartupTimeout: { duration: 'spec.nodeStartupTimeout' },
    },
  },
};

// ---- reading the table's fields from an object

/** The condition lists of one object, each parsed once (a malformed entry throws naming its field). */
export class ConditionLists {
  private readonly lists = new Map<Path, Map<string, ParsedCondition>>();
  constructor(private readonly r: ObjectReader) {}

  list(path: Path): Map<string, ParsedCondition> {
    let l = this.lists.get(path);
    if (!l) this.lists.set(path, (l = readConditions(this.r, path)));
    return l;
  }

  get(at: CondAt): ParsedCondition | undefined {
    return this.list(at.list).get(at.type);
  }

  /** The first of `ats` that is present. */
  first(ats: CondAt[]): ParsedCondition | undefined {
    for (const at of ats) {
      const c = this.get(at);
      if (c) return c;
    }
    return undefined;
  }
}

/** A flag and the first of its conditions present (see timedFact). */
export function readTimedFact(
  r: ObjectReader,
  conds: ConditionLists,
  f: { flag: Path; conditions: CondAt[] },
): TimedFact {
  return timedFact(r.bool(f.flag), conds.first(f.conditions));
}

/** A reference's group, from apiGroup or from the group of apiVersion. */
export function readRefGroup(r: ObjectReader, g: RefGroup): string {
  return 'apiGroup' in g ? (r.string(g.apiGroup) ?? '') : groupOf(r.string(g.apiVersion) ?? '');
}

/** A period in seconds; an empty duration is no period, a malformed one throws naming its field. */
export function readPeriodSeconds(r: ObjectReader, p: Period): number | undefined {
  if ('seconds' in p) return r.int(p.seconds);
  const s = r.string(p.duration);
  if (s === undefined || s === '') return undefined;
  try {
    return parseDuration(s) / 1000;
  } catch (e) {
    r.fail(p.duration, e instanceof DurationError ? e.message : String(e));
  }
}
