// DuckDB's side of tests/bench/bench_parquet.sh.
//
//   node bench.mjs write DIR FILES ROWS GROUP   FILES files of ROWS rows in
//                                               row groups of GROUP rows
//   node bench.mjs groups FILE                  rows of its first row group
//   node bench.mjs count GLOB RUNS              SELECT count(*): median s
//   node bench.mjs scan GLOB RUNS               every value hashed: median s
//   node bench.mjs share GLOB N OFFSET RUNS     the same, over rows
//                                               [OFFSET, OFFSET + N) by
//                                               LIMIT/OFFSET: median s
// Run from the directory holding node_modules.
import { DuckDBInstance } from '@duckdb/node-api';

const [what, ...args] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:', { threads: '2' });
const con = await db.connect();
const quote = (p) => `'${p.replaceAll("'", "''")}'`;
const HASH = 'sum(hash(id, text, score, tag))';

async function median(runs, q) {
  const t = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    await con.runAndReadAll(q);
    t.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  t.sort((a, b) => a - b);
  return t[(t.length - 1) >> 1].toFixed(3);
}

if (what === 'write') {
  const [dir, files, rows, group] = args;
  for (let f = 0; f < Number(files); f++) {
    const name = `${dir}/part-${String(f).padStart(5, '0')}.parquet`;
    await con.run(`COPY (SELECT i::BIGINT AS id,
        repeat(md5(i::VARCHAR), 3) AS text,
        (i * 0.25)::DOUBLE AS score,
        (i % 1000)::INTEGER AS tag
      FROM range(${f * rows}, ${(f + 1) * rows}) r(i))
      TO ${quote(name)} (FORMAT parquet, ROW_GROUP_SIZE ${group})`);
  }
} else if (what === 'groups') {
  const [r] = (await con.runAndReadAll(`SELECT row_group_num_rows::BIGINT n
    FROM parquet_metadata(${quote(args[0])}) WHERE row_group_id = 0
    LIMIT 1`)).getRowObjectsJson();
  console.log(r.n);
} else if (what === 'count') {
  console.log(await median(Number(args[1]),
    `SELECT count(*) FROM read_parquet(${quote(args[0])})`));
} else if (what === 'scan') {
  console.log(await median(Number(args[1]),
    `SELECT ${HASH} FROM read_parquet(${quote(args[0])})`));
} else if (what === 'share') {
  const [glob, n, offset, runs] = args;
  console.log(await median(Number(runs), `SELECT ${HASH} FROM
    (SELECT * FROM read_parquet(${quote(glob)}) LIMIT ${n} OFFSET ${offset})`));
} else {
  console.error('usage: node bench.mjs write|groups|count|scan|share ...');
  process.exit(2);
}
