use super::RunStatus::*;
use super::*;
use strum::VariantArray;

#[test]
fn a_run_ends_on_done_failed_or_cancelled_with_what_came_of_it() {
    let opened = RunOutcome {
        pull_request_url: Some("https://forge/pr/1".into()),
        branch: Some("handoff/run_1".into()),
        ..RunOutcome::default()
    };
    assert_eq!(
        final_progress(RunStatus::Completed, Some(&opened), None),
        Some(("done", "done: opened https://forge/pr/1".to_string()))
    );
    assert_eq!(
        final_progress(RunStatus::Completed, None, None),
        Some(("done", "done".to_string()))
    );
    let error = RunError {
        code: RunErrorCode::CloneFailed,
        message: "no such repository".into(),
    };
    assert_eq!(
        final_progress(RunStatus::Failed, None, Some(&error)),
        Some(("failed", "failed: no such repository".to_string()))
    );
    assert_eq!(
        final_progress(RunStatus::Cancelled, None, None),
        Some(("cancelled", "cancelled".to_string()))
    );
    assert_eq!(final_progress(RunStatus::Running, None, None), None);
}

#[test]
fn terminal_states_are_final() {
    for t in [Completed, Failed, Cancelled] {
        for n in RunStatus::VARIANTS.iter().copied() {
            assert!(!t.can_become(n), "{t:?} -> {n:?}");
        }
    }
}

#[test]
fn forward_path_and_no_going_back() {
    assert!(Queued.can_become(Starting));
    assert!(Starting.can_become(Running));
    assert!(Running.can_become(Completed));
    assert!(Queued.can_become(Cancelled));
    assert!(Running.can_become(Running));
    assert!(!Running.can_become(Queued));
    assert!(!Starting.can_become(Queued));
    assert!(!Queued.can_become(Completed));
    assert!(Running.can_become(PendingApproval));
    assert!(PendingApproval.can_become(Running));
    assert!(PendingApproval.can_become(Cancelled));
    assert!(!PendingApproval.can_become(Completed));
    assert!(!Starting.can_become(PendingApproval));
}

#[test]
fn status_strings_round_trip() {
    for s in RunStatus::VARIANTS.iter().copied() {
        assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    assert_eq!(RunStatus::parse("done"), None);
}

#[test]
fn the_proxys_token_count_is_shown_when_opencodes_is_short_of_it() {
    let mut run: RunRecord = serde_json::from_value(serde_json::json!({
        "id": "run_x", "session_id": "ses_x", "created_by": "t", "status": "cancelled",
        "task": "t", "title": "t", "model": null, "repository": null, "branch": null,
        "created_at": 0, "updated_at": 0, "started_at": null, "completed_at": null,
        "origin": null, "progress": null, "outcome": null, "error": null
    }))
    .expect("a run record");
    let opencode = Tokens {
        input: 100,
        output: 20,
        reasoning: 5,
        ..Tokens::default()
    };
    // Nothing metered (a run from before the proxy kept kinds apart): OpenCode's, as it is.
    assert_eq!(run.tokens_used(None), None);
    assert_eq!(run.tokens_used(Some(&opencode)), Some(opencode.clone()));
    // The proxy counted an answer whose step OpenCode had not finished: the proxy's count.
    run.metered = Tokens {
        input: 240,
        output: 60,
        cache_read: 7,
        ..Tokens::default()
    };
    assert_eq!(run.tokens_used(Some(&opencode)), Some(run.metered.clone()));
    assert_eq!(run.tokens_used(None), Some(run.metered.clone()));
    // OpenCode's is kept when it is as large: it tells reasoning apart.
    let fuller = Tokens {
        input: 240,
        output: 60,
        reasoning: 7,
        ..Tokens::default()
    };
    assert_eq!(run.tokens_used(Some(&fuller)), Some(fuller.clone()));
}
