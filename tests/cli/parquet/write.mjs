// Write the Parquet files tests/cli/parquet/test_footer.sh reads, with two
// writers that share no code with shardfs: DuckDB and parquet-wasm (the
// Rust parquet crate).  Several row groups, snappy/zstd/gzip/uncompressed,
// v1 and v2 data pages, dictionaries on and off, nullable, list, struct
// and map columns.
//
// Usage: node write.mjs OUTDIR          the test files
//        node write.mjs OUTDIR codecs   files in the other codecs
//        node write.mjs OUTDIR seeds    two small files (fuzzing seeds)
//        node write.mjs OUTDIR wide     1000 row groups x 50 columns
// Run from the directory holding node_modules (test_footer.sh copies it
// there).
import { DuckDBInstance } from '@duckdb/node-api';
import * as pq from 'parquet-wasm';
import { readFileSync, writeFileSync } from 'node:fs';

const [out, what = 'files'] = process.argv.slice(2);
if (!out) {
  console.error('usage: node write.mjs OUTDIR [seeds|wide]');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await db.connect();

async function table(rows) {
  await con.run('DROP TABLE IF EXISTS t');
  await con.run(`CREATE TABLE t AS SELECT
      i::BIGINT AS id,
      CASE WHEN i % 7 = 0 THEN NULL ELSE 'name-' || (i % 13) END AS name,
      (i * 0.5)::DOUBLE AS score,
      i % 3 = 0 AS flag,
      DATE '2020-01-01' + (i % 1000)::INTEGER AS day,
      CASE WHEN i % 5 = 0 THEN NULL ELSE [i, i + 1, i % 4] END AS tags,
      {'x': (i % 100)::INTEGER,
       'y': CASE WHEN i % 11 = 0 THEN NULL ELSE 's' || i END} AS rec,
      map(['a', 'k' || (i % 3)], [i, i % 17]) AS m,
      (i % 1000 / 7)::DECIMAL(10, 2) AS amount
    FROM range(${rows}) r(i) ORDER BY i`);
}

async function duck(file, opts) {
  await con.run(`COPY t TO '${out}/${file}' (FORMAT parquet, ${opts})`);
}

// parquet-wasm rewrites what it reads from an uncompressed DuckDB file.
function wasm(file, from, props) {
  let b = new pq.WriterPropertiesBuilder()
    .setCompression(props.codec)
    .setWriterVersion(props.v2 ? pq.WriterVersion.V2 : pq.WriterVersion.V1)
    .setDictionaryEnabled(props.dict)
    .setMaxRowGroupSize(props.rg)
    .setStatisticsEnabled(pq.EnabledStatistics.Page);
  if (props.page)
    b = b.setDataPageSizeLimit(props.page);
  const t = pq.readParquet(readFileSync(`${out}/${from}`));
  writeFileSync(`${out}/${file}`, pq.writeParquet(t, b.build()));
}

if (what === 'files') {
  await table(6500);
  await duck('duck-snappy-v1.parquet',
    'COMPRESSION snappy, ROW_GROUP_SIZE 2048, PARQUET_VERSION v1');
  await duck('duck-zstd-v2.parquet',
    'COMPRESSION zstd, ROW_GROUP_SIZE 2048, PARQUET_VERSION v2');
  await duck('duck-gzip-nodict.parquet',
    'COMPRESSION gzip, ROW_GROUP_SIZE 2048, DICTIONARY_SIZE_LIMIT 0');
  await duck('duck-uncompressed.parquet',
    'COMPRESSION uncompressed, ROW_GROUP_SIZE 2048');
  const from = 'duck-uncompressed.parquet';
  wasm('wasm-snappy-v1.parquet', from,
    { codec: pq.Compression.SNAPPY, v2: false, dict: true, rg: 1500 });
  wasm('wasm-zstd-v2-nodict.parquet', from,
    { codec: pq.Compression.ZSTD, v2: true, dict: false, rg: 1000, page: 4096 });
  wasm('wasm-gzip-v2.parquet', from,
    { codec: pq.Compression.GZIP, v2: true, dict: true, rg: 2000 });
  wasm('wasm-uncompressed-v1.parquet', from,
    { codec: pq.Compression.UNCOMPRESSED, v2: false, dict: false, rg: 3000 });
} else if (what === 'codecs') {
  // the codecs and encodings 'files' has not: brotli, LZ4_RAW, Hadoop LZ4
  await table(3000);
  await duck('duck-brotli-v2.parquet',
    'COMPRESSION brotli, ROW_GROUP_SIZE 2048, PARQUET_VERSION v2');
  await duck('duck-lz4-v1.parquet',
    'COMPRESSION lz4, ROW_GROUP_SIZE 2048, PARQUET_VERSION v1');
  const from = 'duck-lz4-v1.parquet';
  wasm('wasm-brotli-v1.parquet', from,
    { codec: pq.Compression.BROTLI, v2: false, dict: true, rg: 1100, page: 2048 });
  wasm('wasm-lz4raw-v2.parquet', from,
    { codec: pq.Compression.LZ4_RAW, v2: true, dict: false, rg: 900, page: 1024 });
  wasm('wasm-lz4-v1.parquet', from,
    { codec: pq.Compression.LZ4, v2: false, dict: false, rg: 1300, page: 4096 });
} else if (what === 'seeds') {
  await table(60);
  await duck('duck.parquet', 'COMPRESSION zstd, PARQUET_VERSION v2');
  wasm('wasm.parquet', 'duck.parquet',
    { codec: pq.Compression.SNAPPY, v2: false, dict: true, rg: 20 });
} else if (what === 'wide') {
  const cols = Array.from({ length: 50 }, (_, j) => `(i * ${j + 1})::INTEGER AS c${j}`);
  await con.run(`COPY (SELECT ${cols.join(', ')} FROM range(10000) r(i))
    TO '${out}/wide-src.parquet' (FORMAT parquet, COMPRESSION uncompressed)`);
  wasm('wide.parquet', 'wide-src.parquet',
    { codec: pq.Compression.UNCOMPRESSED, v2: false, dict: false, rg: 10 });
} else {
  console.error(`write.mjs: unknown set ${what}: files, codecs, seeds or wide`);
  process.exit(2);
}
