// Check every file of a mounted shardfs view of Parquet shards against the
// plan the mount serves, with three readers that share no code with
// shardfs: DuckDB, hyparquet and parquet-wasm (arrow-rs).
//
//   node views.mjs MNT SRC [RECIPE]
//
// For every reader (rank, worker) of MNT/.shardfs/plan.json, the files of
// MNT/<rank>/<worker>/ in name order are its plan's files; each must read,
// in every reader library, as exactly the rows of its runs of the source
// shard (SRC/<shard>), in order, and DuckDB's parquet_metadata() of it
// must count those rows; every reader has the plan's per_reader rows.  Prints one line per reader; exits 1 with a message on the first
// difference.  With RECIPE (a file holding the SQL of docs/loaders.md's
// parquet_duckdb recipe, which reads /mnt/data/0/0), the recipe run on
// every reader's directory must give that reader's rows, in order.  Run
// from the directory holding node_modules.
import { DuckDBInstance } from '@duckdb/node-api';
import * as pq from 'parquet-wasm';
import { parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { readFileSync, readdirSync, writeFileSync, mkdtempSync, rmSync }
  from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { tmpdir } from 'node:os';

const [mnt, src, recipe] = process.argv.slice(2);
if (!src) {
  console.error('usage: node views.mjs MNT SRC [RECIPE]');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await db.connect();
const tmp = mkdtempSync(`${tmpdir()}/shardfs-pqviews-`);
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

const quote = (p) => `'${p.replaceAll("'", "''")}'`;

async function duck(file) {
  return (await con.runAndReadAll(`SELECT * EXCLUDE (file_row_number)
    FROM read_parquet(${quote(file)}, file_row_number = true)
    ORDER BY file_row_number`)).getRowObjectsJson();
}

async function hyparquet(file) {
  const b = readFileSync(file);
  return parquetReadObjects({
    file: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength),
    compressors,
  });
}

// parquet-wasm decodes the file; its table, written back uncompressed by
// parquet-wasm, is compared through DuckDB.
let nwasm = 0;
async function wasm(file) {
  const t = pq.readParquet(readFileSync(file));
  const props = new pq.WriterPropertiesBuilder()
    .setCompression(pq.Compression.UNCOMPRESSED).build();
  const copy = `${tmp}/${nwasm++}.parquet`;
  writeFileSync(copy, pq.writeParquet(t, props));
  const rows = await duck(copy);
  rmSync(copy);
  return rows;
}

const readers = { duckdb: duck, hyparquet, 'parquet-wasm': wasm };
const sources = new Map(); // `${lib}\0${shard}` -> rows

async function sourceRows(lib, shard) {
  const key = `${lib}\0${shard}`;
  if (!sources.has(key))
    sources.set(key, await readers[lib](`${src}/${shard}`));
  return sources.get(key);
}

const plan = JSON.parse(readFileSync(`${mnt}/.shardfs/plan.json`, 'utf8'));
for (const r of plan.readers) {
  const dir = `${mnt}/${r.rank}/${r.worker}`;
  const names = readdirSync(dir).sort();
  if (names.length !== r.files.length)
    fail(`${dir}: ${names.length} files, the plan has ${r.files.length}`);
  let rows = 0, readerRows = [];
  for (let i = 0; i < names.length; i++) {
    const f = r.files[i], file = `${dir}/${names[i]}`;
    for (const lib of Object.keys(readers)) {
      const all = await sourceRows(lib, f.shard);
      let want = [];
      for (const [first, count] of f.runs)
        want = want.concat(all.slice(first, first + count));
      let got;
      try {
        got = await readers[lib](file);
      } catch (e) {
        fail(`${lib} cannot read ${file}: ${e.message ?? e}`);
      }
      if (lib === 'duckdb')
        readerRows = readerRows.concat(got);
      if (got.length !== want.length)
        fail(`${lib}: ${file}: ${got.length} rows, the plan says ${want.length}`);
      for (let k = 0; k < want.length; k++)
        if (!isDeepStrictEqual(got[k], want[k]))
          fail(`${lib}: ${file}: row ${k} differs from ${f.shard} ` +
            `(${JSON.stringify(got[k], (_, x) => (typeof x === 'bigint' ? `${x}` : x))})`);
    }
    // the footer agrees with the rows: DuckDB's parquet_metadata()
    const [md] = (await con.runAndReadAll(`SELECT
        (SELECT num_rows FROM parquet_file_metadata(${quote(file)}))::BIGINT AS n,
        (SELECT sum(r) FROM (SELECT DISTINCT row_group_id, row_group_num_rows r
           FROM parquet_metadata(${quote(file)})))::BIGINT AS g`)).getRowObjectsJson();
    const want = f.runs.reduce((s, [, count]) => s + count, 0);
    if (Number(md.n) !== want || Number(md.g) !== want)
      fail(`${file}: parquet_metadata() says ${md.n} rows, ${md.g} in its row groups; it holds ${want}`);
    rows += want;
  }
  if (rows !== plan.per_reader)
    fail(`${dir}: ${rows} rows, per_reader is ${plan.per_reader}`);
  if (recipe) {
    const q = readFileSync(recipe, 'utf8').replaceAll('/mnt/data/0/0', dir);
    const got = (await con.runAndReadAll(q)).getRowObjectsJson();
    if (!isDeepStrictEqual(got, readerRows))
      fail(`the parquet_duckdb recipe on ${dir}: ${got.length} rows, ` +
        `not the reader's ${readerRows.length} rows in order`);
  }
  console.log(`${r.rank}/${r.worker}: ${names.length} files, ${rows} rows, ` +
    'identical to the plan\'s rows in DuckDB, hyparquet and parquet-wasm');
}
