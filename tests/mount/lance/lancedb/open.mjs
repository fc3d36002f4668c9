// LanceDB opening every reader's dataset of a mount (its own Lance, not
// pylance's).  Usage: node open.mjs SRC MNT NAME
//
// SRC is the source dataset (a directory NAME), MNT the mount; the plan
// is MNT/.shardfs/plan.json (one epoch's).  The source is read with
// LanceDB too: connect(dirname(SRC)), openTable(NAME less ".lance"), its
// live rows (id, key) in row id order, which for the datasets of
// make_datasets.py is the manifest's fragment order, the shard's sample
// order.  For every reader: connect(MNT/<rank>/<worker>) lists the one
// table NAME less ".lance"; openTable() and countRows() == the reader's
// samples == per_reader; its rows, in row id order (the view's fragments
// are numbered in plan order), equal, id and key, to the source's rows
// its runs name; a filtered query equal to the filter applied to those.
// Over all readers: every id served is a live row, the distinct ids are
// the plan's remaining rows less its dropped ones, and the rows served
// those plus exactly its padding.  Prints a line per reader and one for
// the union; exits 1 on any mismatch.
import * as lancedb from "@lancedb/lancedb";
import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

const [src, mnt, name] = process.argv.slice(2);
const table = name.replace(/\.lance$/, "");

// rows(dir, filter, alone): [{id, key}] of table in dir, in row id
// order; alone: the table must be dir's only one (a reader's directory)
async function rows(dir, filter, alone = true) {
	const db = await lancedb.connect(dir);
	const names = await db.tableNames();
	if (alone ? names.length !== 1 || names[0] !== table : !names.includes(table))
		throw new Error(`${dir}: tables ${JSON.stringify(names)}, not ["${table}"]`);
	const t = await db.openTable(table);
	let q = t.query().select(["id", "key"]).withRowId();
	if (filter) q = q.where(filter);
	const got = await q.toArray();
	got.sort((a, b) => (a._rowid < b._rowid ? -1 : a._rowid > b._rowid ? 1 : 0));
	return { count: await t.countRows(), rows: got.map((r) => ({ id: r.id, key: r.key })) };
}

const same = (a, b) =>
	a.length === b.length && a.every((r, i) => r.id === b[i].id && r.key === b[i].key);

if (basename(src) !== name) throw new Error(`${src} is not a dataset ${name}`);
const whole = (await rows(dirname(src), null, false)).rows;
const live = new Set(whole.map((r) => r.id));
const plan = JSON.parse(readFileSync(join(mnt, ".shardfs", "plan.json"), "utf8"));
if (Array.isArray(plan)) throw new Error("epochs=N: one epoch's plan only");
const reps = plan.options.replicas ?? 1;
let bad = 0;
const served = new Map();
let total = 0;
for (const r of plan.readers) {
	const want = [];
	for (const f of r.files)
		for (const [a, n] of f.runs) want.push(...whole.slice(a, a + n));
	const fwant = want.filter((w) => w.id % 3 === 1);
	let got = null;
	for (let rank = r.rank * reps; rank < (r.rank + 1) * reps; rank++) {
		const dir = join(mnt, String(rank), String(r.worker));
		let line, ok;
		try {
			const g = await rows(dir);
			const fg = await rows(dir, "id % 3 = 1");
			ok = g.count === r.samples && r.samples === plan.per_reader &&
				same(g.rows, want) && same(fg.rows, fwant) && fg.rows.length > 0;
			line = `${g.count} counted, ${g.rows.length} rows, ${fg.rows.length} filtered`;
			got = ok ? g.rows : null;
		} catch (e) {
			ok = false;
			line = `${e.message.split("\n")[0]}`;
			got = null;
		}
		console.log(`rank ${rank} worker ${r.worker}: ${line}: ${ok ? "ok" : "MISMATCH"}`);
		bad += !ok;
	}
	if (got)
		for (const g of got) {
			served.set(g.id, (served.get(g.id) ?? 0) + 1);
			total++;
		}
}
const distinct = [...served.keys()];
const unionOk = distinct.every((id) => live.has(id)) &&
	distinct.length === plan.remaining - plan.dropped &&
	total === plan.remaining - plan.dropped + plan.padding;
console.log(`union: ${distinct.length} distinct of ${live.size} live, ${total} served, ` +
	`padding ${plan.padding}, dropped ${plan.dropped}: ${unionOk ? "ok" : "MISMATCH"}`);
process.exit(bad || !unionOk ? 1 : 0);
