// Builds src/policy.js into a component for cordon's executor-policy world.
// Every WASI feature of the JS engine is disabled: the component imports
// nothing but cordon:sandbox, as cordon's load-time check requires.
//
//   node build.mjs OUT.wasm
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error('usage: node build.mjs OUT.wasm');
  process.exit(2);
}
const { component, imports } = await componentize({
  sourcePath: here('./src/policy.js'),
  witPath: here('../../wit/0.2.0'),
  worldName: 'executor-policy',
  disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
});
const foreign = imports.filter(([name]) => !name.startsWith('cordon:sandbox/'));
if (foreign.length > 0) {
  console.error(`js-policy imports more than cordon:sandbox: ${JSON.stringify(foreign)}`);
  process.exit(1);
}
await writeFile(out, component);
console.log(`wrote ${out} (${component.length} bytes)`);
