// `npm run manifests`: writes clusterctl's provider files to out/ (or the folder given as the first argument):
//   out/addon-components.yaml  every object of the add-on, with ${VAR:=default} variables
//   out/metadata.yaml          the release series and the Cluster API contract they support
//   out/observability-components.yaml  optional: the metrics reader's token, metrics Service, ServiceMonitor,
//                                      PrometheusRule, dashboard
//   out/grafana-dashboard.json         the same dashboard, for a Grafana import
//   out/shard-components.yaml          one shard (a Deployment per --watch-filter value), for sharded installs
//   out/gitops/                        for Argo CD and Flux: a kustomize base with the defaults, a component per option
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { MANIFESTS_DIR, objectsOf, renderProviderFiles } from './render.js';
import { listVariables } from './substitute.js';

const root = resolve(MANIFESTS_DIR, '..');
const outDir = resolve(process.argv[2] ?? join(root, 'out'));
const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string };

try {
  const files = await renderProviderFiles(pkg.version);
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, 'addon-components.yaml'), files.components);
  await writeFile(join(outDir, 'metadata.yaml'), files.metadata);
  await writeFile(join(outDir, 'observability-components.yaml'), files.observability);
  await writeFile(join(outDir, 'grafana-dashboard.json'), files.dashboard);
  await writeFile(join(outDir, 'shard-components.yaml'), files.shard);
  await rm(join(outDir, 'gitops'), { recursive: true, force: true });
  for (const [path, text] of Object.entries(files.gitops)) {
    await mkdir(dirname(join(outDir, 'gitops', path)), { recursive: true });
    await writeFile(join(outDir, 'gitops', path), text);
  }
  const kinds = objectsOf(files.components).map((o) => o.kind);
  console.log(`manifests: ${outDir}/addon-components.yaml (${kinds.length} objects), ${outDir}/metadata.yaml`);
  console.log(
    `manifests: ${outDir}/observability-components.yaml (optional), ` +
      `${outDir}/grafana-dashboard.json, ${outDir}/shard-components.yaml ` +
      `(sharding), ${outDir}/gitops/ (kustomize: base/, components/)`,
  );
  for (const v of listVariables(files.components)) console.log(`  \${${v.name}:=${v.default}}`);
} catch (e) {
  console.error((e as Error).message);
  process.exitCode = 1;
}
