// Preloaded into JoinGuard by the heap benchmark (`--require bench/micro/memory-probe.cjs` in a setting) when
// JOINGUARD_MEMORY_PROBE names a file: every second, one JSON line of what the process itself knows of its
// memory that /metrics does not say: V8's own malloc'd memory (compiler zones, its peak), array buffers, the
// code space, and the handles and requests open by kind (TLS sockets). CommonJS so that --require takes it.
const fs = require('node:fs');
const v8 = require('node:v8');

const file = process.env.JOINGUARD_MEMORY_PROBE;
if (file) {
  const mib = (b) => Math.round((b / 2 ** 20) * 10) / 10;
  const t0 = Date.now();
  const timer = setInterval(() => {
    const h = v8.getHeapStatistics();
    const m = process.memoryUsage();
    const code = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'code_space');
    const kinds = {};
    for (const k of process.getActiveResourcesInfo()) kinds[k] = (kinds[k] ?? 0) + 1;
    const line = {
      at: Date.now(),
      t: (Date.now() - t0) / 1000,
      rss: mib(m.rss),
      heapTotal: mib(m.heapTotal),
      heapUsed: mib(m.heapUsed),
      external: mib(m.external),
      arrayBuffers: mib(m.arrayBuffers),
      malloced: mib(h.malloced_memory),
      peakMalloced: mib(h.peak_malloced_memory),
      codeSpace: code && mib(code.space_size),
      physical: mib(h.total_physical_size),
      contexts: h.number_of_native_contexts,
      resources: kinds,
    };
    fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, 1000);
  timer.unref();
}
