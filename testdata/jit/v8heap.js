// v8heap.js keeps over 100 MiB of JS objects in V8's heap, prints
// "kept HEAPUSED", then waits for a line on stdin: memtrace's footprint
// names the heap's pages "V8 heap" (docs/runtimes-jit.md).
const keep = [];
for (let i = 0; i < 1200000; i++) {
  keep.push({ a: i, b: 'x' + i, c: [i, i + 1, i + 2] });
}
console.log('kept ' + process.memoryUsage().heapUsed);
process.stdin.once('data', () => {
  console.log(keep.length);
  process.exit(0);
});
