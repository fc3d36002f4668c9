// Validate the manifests in a directory against the Kubernetes API schemas
// (kubernetes-models, offline once installed), and the Dockerfile with
// dockerfile-utils; then the shardfs-specific rules every sidecar must
// follow.  Usage: node validate.js DIR.  Prints a tally; exit 1 on failure.
"use strict";
const fs = require("fs");
const path = require("path");
const YAML = require("yaml");
const { Pod, PodTemplateSpec } = require("kubernetes-models/v1");
const { Job } = require("kubernetes-models/batch/v1");
const dockerfile = require("dockerfile-utils");

const dir = process.argv[2];
let passed = 0, failed = 0;
function check(name, fn) {
	try {
		fn();
		passed++;
	} catch (e) {
		failed++;
		console.log(`FAIL: ${name}: ${e.message}`);
	}
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

// The rules of this project: a native sidecar that can mount and whose
// mount reaches the trainer.
function sidecarRules(where, podSpec) {
	const side = (podSpec.initContainers || []).find(c => c.name === "shardfs");
	check(`${where}: has the shardfs sidecar`, () => assert(side, "no init container named shardfs"));
	if (!side) return;
	check(`${where}: sidecar is native`, () => assert(side.restartPolicy === "Always", "restartPolicy must be Always"));
	check(`${where}: sidecar is privileged`, () => assert(side.securityContext && side.securityContext.privileged === true, "securityContext.privileged must be true"));
	check(`${where}: sidecar has a startup probe`, () => assert(side.startupProbe, "startupProbe missing"));
	const out = (side.volumeMounts || []).find(m => m.mountPropagation === "Bidirectional");
	check(`${where}: sidecar mount is Bidirectional`, () => assert(out, "no volumeMount with mountPropagation: Bidirectional"));
	if (!out) return;
	for (const c of podSpec.containers)
		check(`${where}: ${c.name} sees the view`, () => assert((c.volumeMounts || []).some(m => m.name === out.name && m.mountPropagation === "HostToContainer"), `no HostToContainer mount of volume ${out.name}`));
	check(`${where}: the shared volume is an emptyDir`, () => assert(podSpec.volumes.some(v => v.name === out.name && v.emptyDir), `volume ${out.name} is not an emptyDir`));
	// a source another sidecar mounts (s3fs): mounted Bidirectional by an
	// init container before this one, which waits on its startup probe
	const before = podSpec.initContainers.slice(0, podSpec.initContainers.indexOf(side));
	for (const m of (side.volumeMounts || []).filter(m => m.mountPropagation === "HostToContainer"))
		check(`${where}: shardfs sees the mount of volume ${m.name}`, () => assert(before.some(c => c.restartPolicy === "Always" && c.startupProbe && (c.volumeMounts || []).some(n => n.name === m.name && n.mountPropagation === "Bidirectional")), `no native sidecar with a startup probe before it mounts ${m.name} Bidirectional`));
}

// A Job that indexes parts (shardfs-index --part I/N) must be an Indexed
// Job with N completions, or some part is never written.
function indexPartsRule(where, job) {
	for (const c of job.spec.template.spec.containers) {
		const m = (c.command || []).concat(c.args || []).join(" ").match(/--part\s+\S*\/(\d+)/);
		if (!m) continue;
		check(`${where}: ${c.name} indexes ${m[1]} parts, one per completion`, () => {
			assert(job.spec.completionMode === "Indexed", "completionMode must be Indexed");
			assert(job.spec.completions === Number(m[1]), `completions is ${job.spec.completions}, --part says ${m[1]}`);
		});
	}
}

for (const file of fs.readdirSync(dir).sort()) {
	const full = path.join(dir, file);
	if (file === "Dockerfile") {
		check("Dockerfile", () => {
			const problems = dockerfile.validate(fs.readFileSync(full, "utf8"));
			assert(problems.length === 0, problems.map(p => p.message).join("; "));
		});
		continue;
	}
	if (!file.endsWith(".yaml")) continue;
	const docs = YAML.parseAllDocuments(fs.readFileSync(full, "utf8"), { merge: true });
	for (const doc of docs) {
		check(`${file}: YAML`, () => assert(doc.errors.length === 0, doc.errors.join("; ")));
		const obj = doc.toJS({ maxAliasCount: 100 });
		const where = `${file} ${obj.kind}/${obj.metadata ? obj.metadata.name : ""}`;
		if (obj.kind === "Pod") {
			check(`${where}: schema`, () => new Pod(obj).validate());
			sidecarRules(where, obj.spec);
		} else if (obj.kind === "Job") {
			check(`${where}: schema`, () => new Job(obj).validate());
			indexPartsRule(where, obj);
			if ((obj.spec.template.spec.initContainers || []).length)
				sidecarRules(where, obj.spec.template.spec);
		} else if (obj.kind === "PyTorchJob") {
			// a CRD: its envelope by hand, its pod templates by schema
			check(`${where}: apiVersion`, () => assert(obj.apiVersion === "kubeflow.org/v1", obj.apiVersion));
			const specs = obj.spec.pytorchReplicaSpecs;
			check(`${where}: replica specs`, () => assert(specs && specs.Master && specs.Master.replicas === 1, "one Master replica"));
			for (const [role, spec] of Object.entries(specs)) {
				check(`${where} ${role}: replicas`, () => assert(Number.isInteger(spec.replicas) && spec.replicas > 0, "replicas"));
				check(`${where} ${role}: template schema`, () => new PodTemplateSpec(spec.template).validate());
				check(`${where} ${role}: trainer is named pytorch`, () => assert(spec.template.spec.containers.some(c => c.name === "pytorch"), "the operator configures the container named pytorch"));
				sidecarRules(`${where} ${role}`, spec.template.spec);
			}
		} else if (obj.kind === "Kustomization") {
			for (const r of obj.resources)
				check(`${where}: resource ${r}`, () => assert(fs.existsSync(path.join(dir, r)), "missing file"));
		} else {
			check(`${where}: known kind`, () => assert(false, `no schema here for ${obj.kind}`));
		}
	}
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
