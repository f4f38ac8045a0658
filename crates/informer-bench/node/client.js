// The @kubernetes/client-node peer of informer-bench: makeInformer (ListWatch + ObjectCache)
// with K counting handlers, listing in pages of 500 like the other clients. Prints the same
// `outcome ...` line as the Rust clients. Run by `informer-bench`; needs `npm ci` here first.
import * as k8s from '@kubernetes/client-node';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const url = args.url;
const n = Number(args.n);
const m = Number(args.m);
const k = Math.max(1, Number(args.k || 1));

const kc = new k8s.KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'bench', server: url, skipTLSVerify: true }],
  users: [{ name: 'bench' }],
  contexts: [{ name: 'bench', cluster: 'bench', user: 'bench' }],
  currentContext: 'bench',
});
const core = kc.makeApiClient(k8s.CoreV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
// `--resource widgets`: the custom resource (widgets.example.com/v1), read as client-node
// users read custom resources: CustomObjectsApi, plain objects.
const widgets = args.resource === 'widgets';
const path = widgets ? '/apis/example.com/v1/widgets' : '/api/v1/pods';
const listPage = (token) =>
  widgets
    ? custom.listClusterCustomObject({
        group: 'example.com',
        version: 'v1',
        plural: 'widgets',
        limit: 500,
        _continue: token,
      })
    : core.listPodForAllNamespaces({ limit: 500, _continue: token });

// Every page of 500, as one list (the informer wants the whole state and its version).
async function listAll() {
  const items = [];
  let first;
  let token;
  do {
    const page = await listPage(token);
    first ??= page;
    items.push(...page.items);
    // A typed list names it `_continue`; a custom objects list is plain JSON: `continue`.
    token = page.metadata?._continue ?? page.metadata?.continue;
  } while (token);
  return { ...first, items };
}

const started = process.hrtime.bigint();
const counts = new Array(k).fill(0);
const informer = k8s.makeInformer(kc, path, listAll);
for (let h = 0; h < k; h++) {
  const hit = (obj) => {
    if (obj.metadata.name.length > 0) counts[h]++;
  };
  informer.on('add', hit);
  informer.on('update', hit);
  informer.on('delete', hit);
}
informer.on('error', (err) => {
  console.error(`client-node informer: ${err}`);
  process.exit(1);
});
await informer.start();
const synced = process.hrtime.bigint();
const target = n + m;
await new Promise((resolve) => {
  const check = () => (counts.every((c) => c >= target) ? resolve() : setTimeout(check, 1));
  check();
});
const done = process.hrtime.bigint();
const cpu = process.cpuUsage();
const seconds = (ns) => Number(ns) / 1e9;
console.log(
  `outcome sync_s=${seconds(synced - started).toFixed(6)} watch_s=${seconds(done - synced).toFixed(6)} ` +
    `peak_rss_kib=${process.resourceUsage().maxRSS} cpu_s=${((cpu.user + cpu.system) / 1e6).toFixed(3)} ` +
    `switches=${process.resourceUsage().voluntaryContextSwitches + process.resourceUsage().involuntaryContextSwitches}`,
);
process.exit(0);
