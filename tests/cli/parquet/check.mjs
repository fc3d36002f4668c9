// Check what tests/cli/tools/parquet-footer decodes and writes against three
// readers that share no code with shardfs: DuckDB, hyparquet and
// parquet-wasm.  Exits 1 with a message on the first difference.
//
//   node check.mjs meta FILE DUMP.json   the decoded footer (parquet-footer
//                                        dump) against DuckDB's
//                                        parquet_metadata() and hyparquet
//   node check.mjs same FILE NEW         NEW (parquet-footer same) holds
//                                        FILE's footer minus the page index
//                                        and bloom filter fields, nothing
//                                        else changed, and reads back as
//                                        FILE's rows
//   node check.mjs rows FILE SLICE RG... SLICE holds exactly the rows of
//                                        FILE's row groups RG..., in that
//                                        order, for all three readers
// Run from the directory holding node_modules.
import { DuckDBInstance } from '@duckdb/node-api';
import * as pq from 'parquet-wasm';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { tmpdir } from 'node:os';

const { deserializeTCompactProtocol } =
  await import(new URL('./node_modules/hyparquet/src/thrift.js', import.meta.url));

const db = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await db.connect();
const TYPES = ['BOOLEAN', 'INT32', 'INT64', 'INT96', 'FLOAT', 'DOUBLE',
  'BYTE_ARRAY', 'FIXED_LEN_BYTE_ARRAY'];
const CODECS = ['UNCOMPRESSED', 'SNAPPY', 'GZIP', 'LZO', 'BROTLI', 'LZ4',
  'ZSTD', 'LZ4_RAW'];

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

function expectEq(what, got, want) {
  if (!isDeepStrictEqual(got, want))
    fail(`${what}: got ${show(got)}, want ${show(want)}`);
}

function show(v) {
  return JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));
}

async function sql(q) {
  return (await con.runAndReadAll(q)).getRowObjectsJson();
}

function quote(path) {
  return `'${path.replaceAll("'", "''")}'`;
}

function arrayBuffer(path) {
  const b = readFileSync(path);
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
}

const num = (v) => (v === null || v === undefined ? null : Number(v));

async function meta(file, dumpPath) {
  const d = JSON.parse(readFileSync(dumpPath, 'utf8'));
  const [fm] = await sql(`SELECT * FROM parquet_file_metadata(${quote(file)})`);
  expectEq(`${file}: num_rows`, d.num_rows, num(fm.num_rows));
  expectEq(`${file}: row groups`, d.row_groups.length, num(fm.num_row_groups));
  expectEq(`${file}: created_by`, d.created_by, fm.created_by);
  expectEq(`${file}: version`, d.version, num(fm.format_version));
  const rows = await sql(`SELECT * FROM parquet_metadata(${quote(file)})
    ORDER BY row_group_id, column_id`);
  const hy = parquetMetadata(arrayBuffer(file));
  expectEq(`${file}: footer length`, d.footer_len, hy.metadata_length);
  let n = 0;
  for (const r of rows) {
    const rg = num(r.row_group_id), col = num(r.column_id);
    const g = d.row_groups[rg], c = g.columns[col];
    const h = hy.row_groups[rg].columns[col];
    const at = `${file}: row group ${rg} column ${col}`;
    expectEq(`${at}: row group num_rows`, g.num_rows, num(r.row_group_num_rows));
    expectEq(`${at}: columns`, g.columns.length, num(r.row_group_num_columns));
    expectEq(`${at}: path_in_schema`, c.path_in_schema.join(', '), r.path_in_schema);
    expectEq(`${at}: type`, TYPES[c.type], r.type);
    expectEq(`${at}: codec`, CODECS[c.codec], r.compression);
    for (const k of ['file_offset', 'num_values', 'data_page_offset',
      'dictionary_page_offset', 'index_page_offset', 'total_compressed_size',
      'total_uncompressed_size', 'bloom_filter_offset', 'bloom_filter_length'])
      expectEq(`${at}: ${k}`, c[k], num(r[k]));
    for (const k of ['offset_index_offset', 'offset_index_length',
      'column_index_offset', 'column_index_length'])
      expectEq(`${at}: ${k} (hyparquet)`, c[k], num(h[k]));
    expectEq(`${at}: total_byte_size (hyparquet)`, g.total_byte_size,
      num(hy.row_groups[rg].total_byte_size));
    expectEq(`${at}: has_statistics (hyparquet)`, c.has_statistics,
      h.meta_data.statistics !== undefined);
    n++;
  }
  expectEq(`${file}: chunks`, n, d.row_groups.reduce((s, g) => s + g.columns.length, 0));
  console.log(`meta ${file}: ${d.row_groups.length} row groups, ${n} chunks, ` +
    `${d.num_rows} rows agree with DuckDB and hyparquet`);
}

// The raw FileMetaData (every field, known or not) of a file's bytes.
function rawFooter(buf) {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const len = view.getUint32(buf.byteLength - 8, true);
  const reader = { view, offset: buf.byteLength - 8 - len };
  return { meta: deserializeTCompactProtocol(reader), len };
}

// Bytes of a short-form i32/i64 field holding v: header + zigzag varint.
function fieldBytes(v) {
  let z = BigInt(v) >= 0n ? BigInt(v) * 2n : -BigInt(v) * 2n - 1n;
  let n = 1;
  do {
    n++;
    z >>= 7n;
  } while (z > 0n);
  return n;
}

async function same(file, neu) {
  const a = readFileSync(file), b = readFileSync(neu);
  const fa = rawFooter(a), fb = rawFooter(b);
  const dataEnd = a.byteLength - 8 - fa.len;
  expectEq(`${neu}: data before the footer`,
    Buffer.compare(a.subarray(0, dataEnd), b.subarray(0, dataEnd)), 0);
  let dropped = 0, fields = 0;
  for (const g of fa.meta.field_4) {
    for (const c of g.field_1) {
      for (const k of ['field_4', 'field_5', 'field_6', 'field_7']) {
        if (c[k] !== undefined) {
          dropped += fieldBytes(c[k]);
          fields++;
          delete c[k];
        }
      }
      for (const k of ['field_14', 'field_15']) {
        if (c.field_3[k] !== undefined) {
          dropped += fieldBytes(c.field_3[k]);
          fields++;
          delete c.field_3[k];
        }
      }
    }
  }
  expectEq(`${neu}: FileMetaData without page index and bloom filters`,
    fb.meta, fa.meta);
  expectEq(`${neu}: footer length`, fb.len, fa.len - dropped);
  if (fields === 0)
    expectEq(`${neu}: footer bytes`, Buffer.compare(a.subarray(dataEnd), b.subarray(dataEnd)), 0);
  const all = parquetMetadata(arrayBuffer(file)).row_groups.map((_, i) => i);
  await rows(file, neu, all, true);
  console.log(`same ${file}: footer ${fa.len} -> ${fb.len} bytes: ${fields} ` +
    `page index and bloom filter fields dropped (${dropped} bytes), ` +
    'every other field identical; the rows read back identical');
}

// Rows [start, end) of each chosen row group of file, in order.
function ranges(file, rgs) {
  const groups = parquetMetadata(arrayBuffer(file)).row_groups;
  const starts = [0];
  for (const g of groups)
    starts.push(starts[starts.length - 1] + Number(g.num_rows));
  return rgs.map((rg) => {
    if (rg >= groups.length)
      fail(`${file} has ${groups.length} row groups, no ${rg}`);
    return [starts[rg], starts[rg + 1]];
  });
}

async function duckRows(file, range) {
  const where = range ? `WHERE file_row_number >= ${range[0]} AND file_row_number < ${range[1]}` : '';
  return sql(`SELECT * EXCLUDE (file_row_number)
    FROM read_parquet(${quote(file)}, file_row_number = true) ${where}
    ORDER BY file_row_number`);
}

async function duckWant(file, rs) {
  let want = [];
  for (const r of rs)
    want = want.concat(await duckRows(file, r));
  return want;
}

async function hyRows(file, range) {
  const opts = { file: arrayBuffer(file), compressors };
  if (range) {
    opts.rowStart = range[0];
    opts.rowEnd = range[1];
  }
  return parquetReadObjects(opts);
}

// parquet-wasm decodes; its table is written back uncompressed by
// parquet-wasm and those values are compared through DuckDB.
function wasmCopy(file, dir, name) {
  const t = pq.readParquet(readFileSync(file));
  const n = t.recordBatches().reduce((s, b) => s + b.numRows, 0);
  const props = new pq.WriterPropertiesBuilder()
    .setCompression(pq.Compression.UNCOMPRESSED).build();
  writeFileSync(`${dir}/${name}`, pq.writeParquet(t, props));
  return n;
}

async function rows(file, slice, rgs, quiet) {
  const rs = ranges(file, rgs);
  const count = rs.reduce((s, [a, b]) => s + b - a, 0);

  const dGot = await duckRows(slice);
  expectEq(`${slice}: DuckDB row count`, dGot.length, count);
  expectEq(`${slice}: DuckDB rows`, dGot, await duckWant(file, rs));

  const hGot = await hyRows(slice);
  let hWant = [];
  for (const r of rs)
    hWant = hWant.concat(await hyRows(file, r));
  expectEq(`${slice}: hyparquet row count`, hGot.length, count);
  expectEq(`${slice}: hyparquet rows`, hGot, hWant);

  const dir = mkdtempSync(`${tmpdir()}/shardfs-pq-`);
  try {
    expectEq(`${slice}: parquet-wasm row count`, wasmCopy(slice, dir, 'slice.parquet'), count);
    wasmCopy(file, dir, 'file.parquet');
    expectEq(`${slice}: parquet-wasm rows`, await duckRows(`${dir}/slice.parquet`),
      await duckWant(`${dir}/file.parquet`, rs));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (!quiet)
    console.log(`rows ${slice}: row groups ${rgs.join(' ')} of ${file}: ` +
      `${count} rows identical in DuckDB, hyparquet and parquet-wasm`);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'meta' && args.length === 2)
  await meta(args[0], args[1]);
else if (cmd === 'same' && args.length === 2)
  await same(args[0], args[1]);
else if (cmd === 'rows' && args.length >= 3)
  await rows(args[0], args[1], args.slice(2).map(Number), false);
else
  fail('usage: node check.mjs meta FILE DUMP | same FILE NEW | rows FILE SLICE RG...');
