use super::*;
use crate::workers::inputs::check_values;
use serde_json::json;

fn folder(manifest: &str, extra: &[(&str, &str)]) -> FileSet {
    let mut files = FileSet::default();
    files
        .0
        .insert("worker.yml".into(), manifest.as_bytes().to_vec());
    for (path, text) in extra {
        files.0.insert(path.to_string(), text.as_bytes().to_vec());
    }
    files
}

fn rules() -> Rules {
    Rules {
        now_ms: 1_767_225_600_000, // 2026-01-01
        min_schedule_s: 60,
    }
}

const FULL: &str = r#"
schema_version: 1
name: weekly-report
title: Weekly report
description: Summarises the week's numbers.
runtime: python3
inputs:
  - name: city
    type: string
    required: true
  - name: days
    type: number
    default: 7
    min: 1
    max: 31
  - name: format
    type: select
    options: [pdf, csv]
    default: csv
  - name: source
    type: url
  - name: notes
    type: text
  - name: verbose
    type: boolean
    default: false
  - name: data
    type: file
    accept: [.csv, text/csv]
    max_size: 2MiB
outputs:
  files:
    - path: report.csv
      media_type: text/csv
      required: true
  result:
    schema:
      type: object
      required: [rows]
      properties:
        rows: {type: integer}
triggers:
  schedule:
    cron: "0 9 * * 1"
    timezone: Europe/Berlin
    inputs: {city: Berlin}
  webhook: true
secrets: [SLACK_TOKEN]
network:
  allow: [hooks.slack.com, "*.example.com:443"]
limits:
  timeout: 15m
approvals:
  required: true
  label: Post to Slack
"#;

#[test]
fn a_full_manifest_reads_with_defaults_filled_in() {
    let m = read(&folder(FULL, &[("run.py", "print(1)")]), &rules()).unwrap();
    assert_eq!(m.name, "weekly-report");
    assert_eq!(m.runtime, Runtime::Python3);
    assert_eq!(m.entrypoint, "run.py");
    assert_eq!(m.inputs.len(), 7);
    assert_eq!(m.inputs[6].max_size, Some(2 * 1024 * 1024));
    assert_eq!(m.limits.timeout_seconds, 900);
    assert!(m.triggers.manual && m.triggers.webhook);
    let schedule = m.triggers.schedule.as_ref().unwrap();
    assert_eq!(schedule.timezone, "Europe/Berlin");
    assert!(m.approvals.required);
    assert!(m.approvals.allow_before.is_empty());
    assert_eq!(m.outputs.files[0].path, "report.csv");
    assert!(m.tools.is_empty());
    assert_eq!(
        m.command(),
        Some((vec!["python3".to_string(), "run.py".to_string()], vec![]))
    );
    // Inputs at run time: defaults filled, unknown and wrong ones named.
    let given = json!({"city": "Oslo"});
    let values = check_values(&m.inputs, given.as_object().unwrap(), &[]).unwrap();
    assert_eq!(
        serde_json::Value::Object(values),
        json!({"city": "Oslo", "days": 7, "format": "csv", "verbose": false})
    );
    let bad = json!({"days": 40, "format": "doc", "colour": "red", "source": "ftp://x"});
    let problems = check_values(&m.inputs, bad.as_object().unwrap(), &[]).unwrap_err();
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "inputs.colour",
            "inputs.city",
            "inputs.days",
            "inputs.format",
            "inputs.source"
        ]
    );
}

#[test]
fn every_problem_is_listed_by_field() {
    let bad = r#"
schema_version: 2
name: Bad Name
runtime: ruby
timout: 5
inputs:
  - name: x
    type: colour
  - name: n
    type: number
    options: [a]
    default: "seven"
outputs:
  files:
    - path: ../escape.txt
      media_type: text
triggers:
  schedule:
    cron: "* * * * * *"
    timezone: Mars/Base
secrets: [lower-case, HANDOFF_KEY]
network:
  allow: ["bad host"]
limits:
  timeout: 2d
tools: [bash]
"#;
    let problems = read(&folder(bad, &[]), &rules()).unwrap_err();
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    for expected in [
        "timout",
        "schema_version",
        "name",
        "runtime",
        "inputs[0].type",
        "inputs[1].options",
        "inputs[1].default",
        "outputs.files[0].path",
        "outputs.files[0].media_type",
        "triggers.schedule",
        "secrets[0]",
        "secrets[1]",
        "network.allow[0]",
        "limits.timeout",
    ] {
        assert!(
            fields.contains(&expected),
            "{expected} missing from {fields:?}"
        );
    }
    let timout = problems.iter().find(|p| p.field == "timout").unwrap();
    assert!(timout.message.contains("known fields"), "{timout:?}");
    let message = problems_message(&problems);
    assert!(message.starts_with(&format!(
        "the worker folder has {} problem(s)",
        problems.len()
    )));
}

#[test]
fn the_folder_must_hold_what_the_manifest_names() {
    let m = "schema_version: 1\nname: a\nruntime: node\nentrypoint: main.ts\n";
    let problems = read(&folder(m, &[]), &rules()).unwrap_err();
    assert_eq!(problems[0].field, "entrypoint");
    let ok = read(&folder(m, &[("main.ts", "console.log(1)")]), &rules()).unwrap();
    assert_eq!(ok.command().unwrap().1, vec![("BUN_BE_BUN", "1")]);
    let missing = read(&FileSet::default(), &rules()).unwrap_err();
    assert!(missing[0].message.contains("no worker.yml"));
    let skill = "schema_version: 1\nname: triage\nruntime: skill\ntools: [bash, read, teleport]\n";
    let problems = read(&folder(skill, &[("SKILL.md", "Do it.")]), &rules()).unwrap_err();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].field, "tools[2]");
    let skill = "schema_version: 1\nname: triage\nruntime: skill\n";
    let m = read(&folder(skill, &[("SKILL.md", "Do it.")]), &rules()).unwrap();
    assert!(!m.tools.contains(&"bash".to_string()));
    assert_eq!(m.command(), None);
}

#[test]
fn scheduled_runs_need_complete_inputs() {
    let m = r#"
schema_version: 1
name: nightly
runtime: sh
inputs:
  - {name: target, type: string, required: true}
triggers:
  schedule: {cron: "@daily"}
"#;
    let problems = read(&folder(m, &[("run.sh", "echo")]), &rules()).unwrap_err();
    assert_eq!(problems[0].field, "triggers.schedule.inputs.target");
}
