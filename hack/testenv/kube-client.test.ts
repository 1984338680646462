// Unit test (no apiserver): the harness's guarded-write retry.
import { expect } from 'chai';
import { KubeError, retryOnConflict } from './kube-client.js';

const answer = (code: number) => new KubeError(code, 'PATCH', '/apis/x/v1/things/a', '{}');

describe('hack/testenv/kube-client retryOnConflict', () => {
  it('reads and writes again after a 409, and returns the write that went through', async () => {
    let calls = 0;
    const got = await retryOnConflict(async () => {
      if (++calls < 3) throw answer(409);
      return 'written';
    });
    expect([got, calls]).to.deep.equal(['written', 3]);
  });

  it('throws any other answer at once', async () => {
    let calls = 0;
    const err = await retryOnConflict(async () => {
      calls++;
      throw answer(500);
    }).catch((e: unknown) => e);
    expect([(err as KubeError).code, calls]).to.deep.equal([500, 1]);
  });

  it('gives up after the given number of 409s', async () => {
    let calls = 0;
    const err = await retryOnConflict(async () => {
      calls++;
      throw answer(409);
    }, 4).catch((e: unknown) => e);
    expect([(err as KubeError).code, calls]).to.deep.equal([409, 4]);
  });
});
