// packFrames keeps 64 MiB of Buffers (64 of 1 MiB) in a module-level
// array, after a warm-up that makes V8 optimize it. memtrace must charge
// their bytes to packFrames by name (docs/runtimes-jit.md).
//
// It prints "ready" after the warm-up and waits for a line on stdin (a
// test attaches with -p meanwhile), keeps the Buffers, prints "kept 64",
// then exits, the Buffers still live, when stdin ends.
'use strict';
const readline = require('readline');
const kept = [];
const scratch = [];

function packFrames(n, size, keep) {
  const out = keep ? kept : scratch;
  for (let i = 0; i < n; i++) {
    const b = Buffer.alloc(size);
    b[0] = i & 0xff;
    out.push(b);
  }
  return out.length;
}

// Warm-up: small Buffers, dropped, so that V8 optimizes packFrames.
for (let round = 0; round < 20000; round++) {
  packFrames(8, 1 << 10, false);
  scratch.length = 0;
}
process.stdout.write('ready\n');
let packed = false;
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', () => {
  if (packed) return;
  packed = true;
  packFrames(64, 1 << 20, true);
  process.stdout.write(`kept ${kept.length}\n`);
});
rl.on('close', () => process.exit(kept.length === 64 ? 0 : 1));
