// The log lines as CAPI's log pipeline reads them: component-base's JSON keys, klog's text header, the
// reconcile keys controller-runtime adds, verbosity, and no credential in any line. Unit tests on a stream.
import { Writable } from 'node:stream';
import { expect } from 'chai';
import {
  machineLogger,
  makeLogger,
  parseVmodule,
  reconcileLogger,
  setVerbosity,
  type LoggerOptions,
} from './logger.js';

function capture(o: LoggerOptions = {}) {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString().trimEnd());
      done();
    },
  });
  return {
    log: makeLogger({ ...o, stream }),
    lines,
    json: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
const flush = () => new Promise((r) => setImmediate(r));
const CONTROLLER = { name: 'machinejoincheck', group: 'joinguard.io', kind: 'MachineJoinCheck' };

describe('logger', () => {
  it('writes msg, ts (epoch ms) and v; error lines carry err instead of v', async () => {
    const c = capture({ format: 'json' });
    c.log.info('Machine marked', { reason: 'JoinTimeout' });
    c.log.error('Reconciler error', { error: 'boom' });
    await flush();
    const [info, err] = c.json();
    expect(info).to.include({ msg: 'Machine marked', v: 0, reason: 'JoinTimeout' });
    expect(info).not.to.have.any.keys('message', 'level', 'timestamp');
    expect(info!['ts'])
      .to.be.a('number')
      .within(Date.now() - 5_000, Date.now() + 1);
    expect(err).to.include({ msg: 'Reconciler error', err: 'boom' });
    expect(err).not.to.have.any.keys('v', 'error');
  });

  it('puts controller-runtime reconcile keys and CAPI object refs on every line of a reconcile', async () => {
    const c = capture({ format: 'json', verbosity: 4 });
    const r = reconcileLogger(c.log, CONTROLLER, {
      namespace: 'ns1',
      name: 'workers',
      cluster: 'prod',
      reconcileID: 'id-1',
    });
    r.info('Reconciling');
    machineLogger(r, 'ns1', 'prod-md-0-abc').debug('Deadline passed');
    await flush();
    const [a, b] = c.json();
    const keys = {
      controller: 'machinejoincheck',
      controllerGroup: 'joinguard.io',
      controllerKind: 'MachineJoinCheck',
      namespace: 'ns1',
      name: 'workers',
      reconcileID: 'id-1',
    };
    expect(a).to.deep.include({
      ...keys,
      MachineJoinCheck: { name: 'workers', namespace: 'ns1' },
      Cluster: { name: 'prod', namespace: 'ns1' },
    });
    expect(b).to.deep.include({ ...keys, v: 4, Machine: { name: 'prod-md-0-abc', namespace: 'ns1' } });
    const fresh = reconcileLogger(c.log, CONTROLLER, { namespace: 'ns1', name: 'workers' });
    fresh.info('x');
    await flush();
    expect(c.json()[2]!['reconcileID']).to.match(/^[0-9a-f-]{36}$/);
  });

  it('shows lines up to -v and follows a verbosity change in children', async () => {
    const c = capture({ format: 'json', verbosity: 0 });
    const child = c.log.child({ controller: 'x' });
    child.debug('hidden at v0');
    child.verbose('hidden at v0');
    child.info('shown');
    setVerbosity(c.log, 5);
    child.debug('shown at v5');
    child.silly('also shown at v5');
    setVerbosity(c.log, 2);
    child.verbose('shown at v2');
    child.debug('hidden at v2');
    await flush();
    expect(c.json().map((l) => `${l['msg']}:${l['v']}`)).to.deep.equal([
      'shown:0',
      'shown at v5:4',
      'also shown at v5:5',
      'shown at v2:2',
    ]);
  });

  it('writes klog text: severity, date, time, pid, quoted msg, key=value, objects as namespace/name', async () => {
    const c = capture({ format: 'text' });
    const r = reconcileLogger(c.log, CONTROLLER, {
      namespace: 'ns1',
      name: 'workers',
      cluster: 'prod',
      reconcileID: 'id-1',
    });
    r.warn('Owner refused', { count: 2, dryRun: false });
    c.log.error('Reconciler error', { error: 'it "broke"', Machine: { name: 'm', namespace: 'ns1' } });
    await flush();
    expect(c.lines[0]).to.match(/^W\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ joinguard\] "Owner refused" /);
    expect(c.lines[0])
      .to.include('controller="machinejoincheck"')
      .and.include('MachineJoinCheck="ns1/workers"')
      .and.include('Cluster="ns1/prod"');
    expect(c.lines[0]).to.include('count=2 dryRun=false');
    expect(c.lines[1]).to.match(/^E\d{4} .*\] "Reconciler error" err="it \\"broke\\"" Machine="ns1\/m"$/);
  });

  it('never writes a credential, at any depth', async () => {
    const c = capture({ format: 'json' });
    c.log.info('Connecting', {
      token: 'sekret-1',
      kubeconfig: 'apiVersion: v1 … sekret-2',
      nested: { clientKey: 'sekret-3', name: 'ok' },
      Secret: { name: 'prod-kubeconfig', namespace: 'ns1' },
    });
    await flush();
    expect(c.lines[0]).not.to.match(/sekret/);
    expect(c.json()[0]).to.deep.include({
      token: '[redacted]',
      nested: { clientKey: '[redacted]', name: 'ok' },
      Secret: { name: 'prod-kubeconfig', namespace: 'ns1' },
    });
  });

  it('marks every JSON error line with err, null when no error value was given (the runbook greps for it)', async () => {
    const c = capture({ format: 'json' });
    c.log.error('Lost the leader Lease');
    c.log.warn('Slow');
    await flush();
    const [err, warn] = c.json();
    expect(err).to.deep.equal({ ts: err!['ts'], msg: 'Lost the leader Lease', err: null });
    expect(c.lines[0]).to.include('"err":null');
    expect(warn).not.to.have.property('err');
  });

  it('--vmodule raises the verbosity of matching source files only (klog: the file name without extension, or a path pattern)', async () => {
    // This file logs: "logger.test" matches its name; "runtime/*" and "runtime/logger*" its path below
    // the project; "controllers/*" and "executor" nothing here.
    for (const [rules, shown] of [
      [parseVmodule('logger.test=4'), true],
      [parseVmodule('logger.t*=4'), true],
      [parseVmodule('runtime/*=4'), true],
      [parseVmodule('runtime/logger*=4'), true],
      [parseVmodule('controllers/*=4'), false],
      [parseVmodule('logger.test=3'), false],
      [parseVmodule('executor=5'), false],
    ] as const) {
      const c = capture({ format: 'text', verbosity: 2, vmodule: [...rules] });
      c.log.debug('At V4');
      c.log.verbose('At V2');
      await flush();
      expect(
        c.lines.map((l) => /"(.*)"/.exec(l)![1]),
        JSON.stringify(rules),
      ).to.deep.equal(shown ? ['At V4', 'At V2'] : ['At V2']);
    }
    expect(() => makeLogger({ format: 'json', vmodule: parseVmodule('x=1') })).to.throw(
      /Only supported for text log format/,
    );
  });

  it('refuses an unknown format', () => {
    expect(() => makeLogger({ format: 'yaml' as 'json' })).to.throw(
      /--logging-format: "yaml" is not one of text, json/,
    );
  });
});
