//! The launch files of `deploy/` (see deploy/README.md): the Kubernetes manifests parse and hold
//! what a multi-node firemesh job needs, so does the Slurm script, and every flag they pass to
//! `firemesh train` is one it knows. Each check names the first field it finds wrong.

use crate::common::{cli, scratch};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// Seconds a pod keeps after firemesh's stop deadline, at least (its shell, the kubelet).
const MARGIN_S: f64 = 5.0;
/// GPUs per node: the files are for nodes of 8, every one of them driven by the node's process.
const GPUS: f64 = 8.0;

type Check = Result<(), String>;

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The YAML documents of `deploy/FILE`, as JSON values.
fn documents(file: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(&read(file))
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{file}: {e}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The value at `pointer` (a JSON pointer: `~1` stands for a `/` in a key).
fn at<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Value, String> {
    doc.pointer(pointer)
        .ok_or_else(|| format!("{pointer}: missing"))
}

fn string<'a>(doc: &'a Value, pointer: &str) -> Result<&'a str, String> {
    at(doc, pointer)?
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{pointer}: not a non-empty string"))
}

fn number(doc: &Value, pointer: &str) -> Result<f64, String> {
    let v = at(doc, pointer)?;
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| format!("{pointer}: not a number"))
}

fn expect(doc: &Value, pointer: &str, want: &str) -> Check {
    match string(doc, pointer)? {
        got if got == want => Ok(()),
        got => Err(format!("{pointer}: {got:?}, expected {want:?}")),
    }
}

fn list<'a>(doc: &'a Value, pointer: &str) -> Result<&'a Vec<Value>, String> {
    at(doc, pointer)?
        .as_array()
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("{pointer}: not a non-empty list"))
}

/// The names of the `ReadWriteMany` claims among `docs`.
fn shared_claims(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .filter(|d| d["kind"] == "PersistentVolumeClaim")
        .filter(|d| {
            d.pointer("/spec/accessModes")
                .and_then(Value::as_array)
                .is_some_and(|m| m.iter().any(|m| m == "ReadWriteMany"))
        })
        .filter_map(|d| d.pointer("/metadata/name")?.as_str().map(String::from))
        .collect()
}

/// The pod spec at `pod` of `doc`: containers with an image and a command, each with the run
/// folder at /runs from one of the shared `claims`. Returns the containers' command lines.
fn check_pod(doc: &Value, pod: &str, claims: &[String]) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for i in 0..list(doc, &format!("{pod}/containers"))?.len() {
        let c = format!("{pod}/containers/{i}");
        string(doc, &format!("{c}/image"))?;
        let words = |key: &str| -> Vec<String> {
            let l = doc.pointer(&format!("{c}/{key}")).and_then(Value::as_array);
            l.into_iter()
                .flatten()
                .filter_map(|w| w.as_str().map(String::from))
                .collect()
        };
        list(doc, &format!("{c}/command"))?;
        lines.push([words("command"), words("args")].concat().join(" "));
        let mounts = list(doc, &format!("{c}/volumeMounts"))?;
        let volume = mounts
            .iter()
            .find(|m| m["mountPath"] == "/runs")
            .and_then(|m| m["name"].as_str())
            .ok_or_else(|| format!("{c}/volumeMounts: nothing mounted at /runs"))?;
        let claim = list(doc, &format!("{pod}/volumes"))?
            .iter()
            .find(|v| v["name"] == volume)
            .and_then(|v| v.pointer("/persistentVolumeClaim/claimName")?.as_str())
            .ok_or_else(|| format!("{pod}/volumes: no persistentVolumeClaim named {volume:?}"))?;
        if !claims.iter().any(|c| c == claim) {
            return Err(format!(
                "{pod}/volumes: claim {claim:?} is not a ReadWriteMany PersistentVolumeClaim of deploy/mpijob.yaml"
            ));
        }
    }
    Ok(lines)
}

/// A pod that runs firemesh on a node: all its GPUs, and time to stop within `deadline`.
fn check_node(doc: &Value, pod: &str, deadline: f64) -> Check {
    let gpus = number(
        doc,
        &format!("{pod}/containers/0/resources/limits/nvidia.com~1gpu"),
    )?;
    if gpus != GPUS {
        return Err(format!("{pod}: {gpus} GPUs, expected the node's {GPUS}"));
    }
    let grace = format!("{pod}/terminationGracePeriodSeconds");
    match number(doc, &grace)? {
        g if g >= deadline + MARGIN_S => Ok(()),
        g => Err(format!(
            "{grace}: {g} s, less than --stop-deadline {deadline} s + {MARGIN_S} s"
        )),
    }
}

/// The arguments after `firemesh train` in a shell script (continued lines joined, comments
/// skipped).
fn firemesh_args(script: &str) -> Option<Vec<String>> {
    let joined = script.replace("\\\n", " ");
    let mut lines = joined.lines().filter(|l| !l.trim_start().starts_with('#'));
    let line = lines.find(|l| l.contains("firemesh train"))?;
    let rest = line.split_once("firemesh train")?.1;
    let ends = |w: &&str| matches!(*w, "&" | "&&" | ";" | "|" | "||");
    Some(
        rest.split_whitespace()
            .take_while(|w| !ends(w))
            .map(String::from)
            .collect(),
    )
}

/// `firemesh train` in `line` resumes, names its run folder and its stop deadline, which it
/// returns.
fn check_firemesh(line: &str, at: &str) -> Result<f64, String> {
    let args = firemesh_args(line).ok_or_else(|| format!("{at}: no `firemesh train`"))?;
    for flag in ["--resume", "--run-dir"] {
        if !args.iter().any(|a| a == flag) {
            return Err(format!("{at}: `firemesh train` without {flag}"));
        }
    }
    let deadline = args.iter().position(|a| a == "--stop-deadline");
    deadline
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .ok_or_else(|| format!("{at}: `firemesh train` without --stop-deadline SECONDS"))
}

fn check_mpijob(docs: &[Value]) -> Check {
    let job = docs
        .iter()
        .find(|d| d["kind"] == "MPIJob")
        .ok_or("no kind: MPIJob")?;
    expect(job, "/apiVersion", "kubeflow.org/v2beta1")?;
    string(job, "/metadata/name")?;
    if number(job, "/spec/slotsPerWorker")? != 1.0 {
        return Err("/spec/slotsPerWorker: not 1 (one process per node)".into());
    }
    let claims = shared_claims(docs);
    let launcher = "/spec/mpiReplicaSpecs/Launcher";
    if number(job, &format!("{launcher}/replicas"))? != 1.0 {
        return Err(format!("{launcher}/replicas: not 1"));
    }
    expect(job, &format!("{launcher}/restartPolicy"), "OnFailure")?;
    let lines = check_pod(job, &format!("{launcher}/template/spec"), &claims)?;
    let mpirun = lines.iter().find(|l| l.contains("mpirun"));
    let mpirun = mpirun.ok_or_else(|| format!("{launcher}: no container runs mpirun"))?;
    let deadline = check_firemesh(mpirun, launcher)?;
    let worker = "/spec/mpiReplicaSpecs/Worker";
    if number(job, &format!("{worker}/replicas"))? < 1.0 {
        return Err(format!("{worker}/replicas: no worker"));
    }
    expect(job, &format!("{worker}/restartPolicy"), "OnFailure")?;
    let pod = format!("{worker}/template/spec");
    check_pod(job, &pod, &claims)?;
    check_node(job, &pod, deadline)
}

fn check_slurm(script: &str) -> Check {
    let option = |name: &str| {
        let mut lines = script.lines().filter_map(|l| l.strip_prefix("#SBATCH "));
        lines.find_map(|o| o.trim().strip_prefix(name).map(String::from))
    };
    for (name, want) in [("--ntasks-per-node=", "1"), ("--gpus-per-node=", "8")] {
        match option(name) {
            Some(v) if v == want => {}
            v => return Err(format!("#SBATCH {name}: {v:?}, expected {want}")),
        }
    }
    // TERM to the tasks (not `B:`, the batch shell alone), this many seconds ahead.
    let notice = option("--signal=TERM@").and_then(|s| s.parse::<f64>().ok());
    let notice = notice.ok_or("#SBATCH --signal=TERM@SECONDS: missing")?;
    if !script.lines().any(|l| l.trim_start().starts_with("srun ")) {
        return Err("no srun".into());
    }
    let deadline = check_firemesh(script, "slurm.sbatch")?;
    if notice < deadline + MARGIN_S {
        return Err(format!(
            "--signal=TERM@{notice}: less than --stop-deadline {deadline} s + {MARGIN_S} s"
        ));
    }
    Ok(())
}

#[test]
fn the_mpijob_holds_a_multi_node_job() {
    check_mpijob(&documents("mpijob.yaml")).unwrap();
}

#[test]
fn the_slurm_script_holds_a_multi_node_job() {
    check_slurm(&read("slurm.sbatch")).unwrap();
}

#[test]
fn the_checks_reject_what_is_missing() {
    let docs = documents("mpijob.yaml");
    let job = docs.iter().position(|d| d["kind"] == "MPIJob").unwrap();
    let worker = "/spec/mpiReplicaSpecs/Worker/template/spec";
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut docs = docs.clone();
        edit(&mut docs[job]);
        check_mpijob(&docs).unwrap_err()
    };
    let no_grace = broken(&|j| {
        let pod = j.pointer_mut(worker).unwrap().as_object_mut().unwrap();
        pod.remove("terminationGracePeriodSeconds").unwrap();
    });
    assert_eq!(
        no_grace,
        format!("{worker}/terminationGracePeriodSeconds: missing")
    );
    let short = broken(&|j| {
        let grace = format!("{worker}/terminationGracePeriodSeconds");
        *j.pointer_mut(&grace).unwrap() = 25.into();
    });
    assert!(
        short.contains("25 s, less than --stop-deadline 25 s"),
        "{short}"
    );
    let no_gpus = broken(&|j| {
        let limits = j
            .pointer_mut(&format!("{worker}/containers/0/resources/limits"))
            .unwrap();
        limits
            .as_object_mut()
            .unwrap()
            .remove("nvidia.com/gpu")
            .unwrap();
    });
    assert!(no_gpus.ends_with("nvidia.com~1gpu: missing"), "{no_gpus}");
    let no_resume = broken(&|j| {
        let args = "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0/args/0";
        let script = j.pointer_mut(args).unwrap();
        *script = script.as_str().unwrap().replace("--resume ", "").into();
    });
    assert!(no_resume.ends_with("without --resume"), "{no_resume}");
    let no_claim: Vec<Value> = docs
        .iter()
        .filter(|d| d["kind"] != "PersistentVolumeClaim")
        .cloned()
        .collect();
    let e = check_mpijob(&no_claim).unwrap_err();
    assert!(
        e.contains("not a ReadWriteMany PersistentVolumeClaim"),
        "{e}"
    );
    let early = read("slurm.sbatch").replace("TERM@60", "TERM@20");
    let e = check_slurm(&early).unwrap_err();
    assert!(e.contains("TERM@20: less than --stop-deadline 25 s"), "{e}");
}

#[test]
fn every_flag_the_deploy_files_pass_is_one_firemesh_train_knows() {
    let help = cli(&scratch("deploy-help"), &["train", "--help"]);
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    let known: Vec<&str> = help
        .split_whitespace()
        .map(|w| w.trim_end_matches(','))
        .collect();
    for (file, text) in [
        ("mpijob.yaml", read("mpijob.yaml")),
        ("slurm.sbatch", read("slurm.sbatch")),
    ] {
        let args = firemesh_args(&text).unwrap_or_else(|| panic!("{file}: no `firemesh train`"));
        assert!(args.iter().any(|a| a == "--resume"), "{file}: {args:?}");
        for flag in args.iter().filter(|a| a.starts_with("--")) {
            assert!(
                known.contains(&flag.as_str()),
                "{file}: `firemesh train {flag}` is not in --help"
            );
        }
    }
}
