// The list of CAPI's flags that cmd/flags.test.ts holds `joinguard --help` to (cmd/capi-flags.ts) is CAPI's own:
// the `--help` of CAPI v1.14.2's real core manager, built by hack/testenv/build.sh, names the same flags with the
// same defaults. So the claim in docs/install.md ("every flag of CAPI's managers that means the same thing, with
// CAPI's name, type and default") rests on CAPI's binary, not on a list written by hand.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { expect } from 'chai';
import { CAPI_FLAGS, CAPI_VERSION, NOT_TAKEN, OTHER_DEFAULT } from '../../cmd/capi-flags.js';
import { printedDefault, typeWord, usage } from '../../cmd/flags.js';
import { readBuiltRelease } from '../../hack/testenv/capi-releases.js';
import { ensureBuilt } from '../../hack/testenv/testenv.js';

interface HelpFlag {
  def: string;
}

/** pflag's --help: `  -v, --name type   description (default x)`, the description continued on indented lines; name and default. */
function pflagHelp(text: string): Map<string, HelpFlag> {
  const out = new Map<string, HelpFlag>();
  const entries: string[] = [];
  for (const line of text.split('\n')) {
    if (/^ {2,6}(?:-[a-z], )?--[a-z]/.test(line)) entries.push(line.trim());
    else if (entries.length > 0 && /^\s{20,}\S/.test(line)) entries[entries.length - 1] += ` ${line.trim()}`;
  }
  for (const e of entries) {
    const m = /^(?:-[a-z], )?--([a-z0-9-]+)/.exec(e);
    if (!m) continue;
    const def = /\(default (.*?)\)$/.exec(e);
    out.set(m[1]!, { def: def ? def[1]! : '' });
  }
  return out;
}

const run = (file: string, args: string[]) =>
  new Promise<string>((resolve) => execFile(file, args, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`)));

describe(`install: cmd/capi-flags.ts is CAPI ${CAPI_VERSION}'s core manager's --help`, function () {
  this.timeout(30 * 60_000); // a cold build of CAPI's managers; cached, nothing
  let capi: Map<string, HelpFlag>;

  before(async () => {
    const binDir = await ensureBuilt((l) => process.stderr.write(`${l}\n`), 'v1.14');
    expect(readBuiltRelease(binDir).version).to.equal(CAPI_VERSION);
    capi = pflagHelp(await run(join(binDir, 'capi-core'), ['--help']));
  });

  it('names the same flags', () => {
    expect([...capi.keys()].sort()).to.deep.equal(CAPI_FLAGS.map((f) => f.name).sort());
  });

  it('with the same printed defaults (v: CAPI sets 2 in main(), after --help has read the flag)', () => {
    const differ = CAPI_FLAGS.filter((f) => f.name !== 'v' && capi.get(f.name)!.def !== f.def).map(
      (f) => `${f.name}: list ${f.def}, binary ${capi.get(f.name)!.def}`,
    );
    expect(differ).to.deep.equal([]);
  });

  it("and joinguard's --help gives every flag it takes CAPI's type and default (or the one listed in OTHER_DEFAULT)", () => {
    const ours = usage();
    const problems: string[] = [];
    for (const f of CAPI_FLAGS) {
      if (NOT_TAKEN[f.name] !== undefined) continue;
      const theirs = capi.get(f.name)!.def;
      const expected = OTHER_DEFAULT[f.name] ?? theirs;
      if (OTHER_DEFAULT[f.name] === theirs)
        problems.push(`${f.name}: listed with another default, but CAPI's is the same`);
      if (!new RegExp(`--${f.name}\\b`).test(ours)) problems.push(`${f.name}: missing`);
      else if (typeWord(f.name) !== f.type || (f.name !== 'v' && printedDefault(f.name) !== expected)) {
        problems.push(
          `${f.name}: ours ${typeWord(f.name)} ${printedDefault(f.name)}, expected ${f.type} ${expected} (CAPI's ${theirs})`,
        );
      }
    }
    expect(problems).to.deep.equal([]);
  });
});
