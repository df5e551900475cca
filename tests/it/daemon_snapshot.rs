//! Snapshots on the daemon when calls overlap: two downloads or two uploads at once each get
//! or restore their own archive whole, and no archive is left in the sandbox's folder — not
//! after a download, a refused upload, an upload its client abandons or one a delete cut off,
//! nor (once it starts again) by a daemon killed mid-upload.

use futures::StreamExt;
use handoff_tests::daemon::{Client, Daemon};
use std::path::Path;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// The archive files in a sandbox's folder (beside its workspace), by name.
fn archives_in(folder: &Path) -> Vec<String> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".tar.gz"))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits up to 10 s for the daemon to let go of every archive in `folder`.
async fn no_archive_left(folder: &Path, after: &str) {
    let mut left = archives_in(folder);
    for _ in 0..100 {
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = archives_in(folder);
    }
    panic!("archives left in the sandbox's folder after {after}: {left:?}");
}

async fn download(c: &Client) -> Vec<u8> {
    let answer = c
        .http
        .get(format!("{}/snapshot", c.base))
        .bearer_auth(&c.token)
        .send()
        .await
        .expect("GET snapshot");
    assert_eq!(answer.status(), 200);
    answer.bytes().await.expect("the whole archive").to_vec()
}

/// Sends `archive` as the sandbox's new workspace in 16 pieces, `gap` apart.
async fn upload_slowly(c: &Client, archive: Vec<u8>, gap: Duration) -> (u16, String) {
    let size = archive.len().div_ceil(16);
    let pieces: Vec<Vec<u8>> = archive.chunks(size).map(<[u8]>::to_vec).collect();
    let body = futures::stream::iter(pieces).then(move |piece| async move {
        tokio::time::sleep(gap).await;
        Ok::<_, std::io::Error>(piece)
    });
    let answer = c
        .http
        .put(format!("{}/snapshot", c.base))
        .bearer_auth(&c.token)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .expect("PUT snapshot");
    let status = answer.status().as_u16();
    (status, answer.text().await.unwrap_or_default())
}

/// A workspace of one marker file and 2 MB nobody could compress, so its archive is large
/// enough for two transfers to overlap.
async fn fill(c: &Client, marker: &str) {
    let made = c
        .exec(
            &format!("echo {marker} > which && head -c 2000000 /dev/urandom > noise && sha256sum noise > noise.sum"),
            30_000,
        )
        .await;
    assert_eq!(made["exit_code"], 0, "{made}");
}

#[tokio::test]
async fn overlapping_snapshots_each_get_and_restore_their_own_archive_and_leave_none_behind() {
    let own = Daemon::start();
    let c = Client::new(&own, "snap-overlap").await;
    let folder = own.sandboxes().join("snap-overlap");
    fill(&c, "first").await;
    let (a, b) = tokio::join!(download(&c), download(&c));
    assert_eq!(a, b, "two downloads at once got different archives");
    let first = a;
    no_archive_left(&folder, "two downloads").await;
    fill(&c, "second").await;
    let second = download(&c).await;
    assert_ne!(first, second);
    no_archive_left(&folder, "a download").await;

    // Two uploads interleaved piece by piece; each must restore whole, the later one last.
    let (one, two) = tokio::join!(upload_slowly(&c, first, Duration::from_millis(40)), async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        upload_slowly(&c, second, Duration::from_millis(60)).await
    });
    assert_eq!(one.0, 200, "the first upload: {}", one.1);
    assert_eq!(two.0, 200, "the second upload: {}", two.1);
    let state = c.exec("cat which && sha256sum -c noise.sum", 30_000).await;
    assert_eq!(
        state["stdout"], "second\nnoise: OK\n",
        "the workspace is the last upload, whole: {state}"
    );
    no_archive_left(&folder, "two uploads").await;

    // A refused upload leaves nothing either.
    let (status, body) = upload_slowly(&c, b"not an archive".repeat(100), Duration::ZERO).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a valid workspace archive"), "{body}");
    no_archive_left(&folder, "a refused upload").await;
}

/// Starts an upload that announces 10 MB and sends 1 MB; the connection, once the daemon has
/// begun writing it.
async fn start_upload(own: &Daemon, c: &Client, folder: &Path) -> tokio::net::TcpStream {
    let mut raw = tokio::net::TcpStream::connect(own.url().trim_start_matches("http://"))
        .await
        .expect("connect to the daemon");
    let head = format!(
        "PUT /v1/sandboxes/{}/snapshot HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\ncontent-length: 10000000\r\n\r\n",
        c.id, c.token
    );
    raw.write_all(head.as_bytes()).await.unwrap();
    raw.write_all(&vec![7u8; 1_000_000]).await.unwrap();
    raw.flush().await.unwrap();
    for _ in 0..50 {
        if !archives_in(folder).is_empty() {
            return raw;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the upload never reached the daemon");
}

#[tokio::test]
async fn uploads_abandoned_cut_off_by_a_delete_or_by_a_killed_daemon_leave_nothing_behind() {
    let mut own = Daemon::start();
    let c = Client::new(&own, "snap-abandoned").await;
    let folder = own.sandboxes().join("snap-abandoned");
    // The client announces 10 MB, sends 1 MB and goes away.
    let raw = start_upload(&own, &c, &folder).await;
    drop(raw);
    no_archive_left(&folder, "an abandoned upload").await;
    // A daemon killed mid-upload leaves its part; the next daemon removes it when it starts.
    let raw = start_upload(&own, &c, &folder).await;
    own.kill();
    drop(raw);
    own.restart();
    // A new client: the old one's pooled connection went with the daemon.
    let c = Client::new(&own, "snap-abandoned").await;
    assert_eq!(
        archives_in(&folder),
        Vec::<String>::new(),
        "left by the killed daemon"
    );

    // A delete while an upload is under way: the upload hears that the sandbox is gone.
    fill(&c, "doomed").await;
    let archive = download(&c).await;
    let uploading = {
        let c = Client {
            http: reqwest::Client::new(),
            base: c.base.clone(),
            id: c.id.clone(),
            token: c.token.clone(),
        };
        tokio::spawn(async move { upload_slowly(&c, archive, Duration::from_millis(100)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deleted = c.send(reqwest::Method::DELETE, "", None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let (status, body) = uploading.await.unwrap();
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains("deleted") || body.contains("does not exist"),
        "{body}"
    );
    assert!(
        !folder.exists(),
        "the deleted sandbox's folder came back: {:?}",
        archives_in(&folder)
    );
}
