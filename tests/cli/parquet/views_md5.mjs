// Check every file of a mounted shardfs view of Parquet shards against the
// plan the mount serves, cheaply enough for files of a million rows:
// DuckDB reads each file, and the MD5 of its rows (each row as DuckDB
// prints it, in file order) and their count must be those of the rows of
// its runs of the source shard (SRC/<shard>), in the plan's order; every
// reader must have the plan's per_reader rows.  views.mjs compares row by
// row, in three readers, what is small enough to hold as objects.
//
//   node views_md5.mjs MNT SRC
//
// Prints one line per reader; exits 1 with a message on the first
// difference.  Run from the directory holding node_modules.
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync, readdirSync } from 'node:fs';

const [mnt, src] = process.argv.slice(2);
if (!src) {
  console.error('usage: node views_md5.mjs MNT SRC');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await db.connect();
const quote = (p) => `'${p.replaceAll("'", "''")}'`;

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

// The count and MD5 of the rows of file, in the order of runs (each
// [first, count] of the file's rows; all of them when runs is null).
async function digest(file, runs) {
  const rs = runs ?? [[0, 2 ** 62]];
  const values = rs.map(([first, count], i) =>
    `(${i}, ${first}, ${first + count})`).join(', ');
  const [r] = (await con.runAndReadAll(`SELECT count(*)::BIGINT AS n,
      md5(coalesce(string_agg(t.row, chr(10) ORDER BY runs.i, t.frn),
        '')) AS md5
    FROM (SELECT file_row_number AS frn,
            struct_pack(*COLUMNS(* EXCLUDE (file_row_number)))::VARCHAR
              AS row
          FROM read_parquet(${quote(file)}, file_row_number = true)) t
    JOIN (VALUES ${values}) runs(i, lo, hi)
      ON t.frn >= runs.lo AND t.frn < runs.hi`)).getRowObjectsJson();
  return `${r.n} rows, md5 ${r.md5}`;
}

const plan = JSON.parse(readFileSync(`${mnt}/.shardfs/plan.json`, 'utf8'));
for (const r of plan.readers) {
  const dir = `${mnt}/${r.rank}/${r.worker}`;
  const names = readdirSync(dir).sort();
  if (names.length !== r.files.length)
    fail(`${dir}: ${names.length} files, the plan has ${r.files.length}`);
  let rows = 0;
  for (let i = 0; i < names.length; i++) {
    const f = r.files[i], file = `${dir}/${names[i]}`;
    const want = await digest(`${src}/${f.shard}`, f.runs);
    const got = await digest(file, null);
    if (got !== want)
      fail(`${file}: ${got}; its runs of ${f.shard}: ${want}`);
    rows += f.runs.reduce((s, [, count]) => s + count, 0);
  }
  if (rows !== plan.per_reader)
    fail(`${dir}: ${rows} rows, per_reader is ${plan.per_reader}`);
  console.log(`${dir}: ${names.length} files, ${rows} rows as planned`);
}
