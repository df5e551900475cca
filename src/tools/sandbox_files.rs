//! The `sandbox_files_*` tools: read, write and list a sandbox's workspace, and download a
//! directory of it as a ZIP.

use super::access::{annotations, not_found_hint, sandbox};
use super::sandbox_params::*;
use super::sandbox_views::*;
use super::{Ctx, ToolHandler};
use crate::error::{Error, Result};
use crate::sandbox::api::{ListFiles, ReadFile, WriteFile, ZipDir};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use handoff_wire::Encoding;
use rmcp::model::{ContentBlock, ResourceContents, ToolAnnotations};

pub struct FilesRead;
pub struct FilesWrite;
pub struct FilesList;
pub struct FilesDownloadDir;

impl ToolHandler for FilesRead {
    const NAME: &'static str = "sandbox_files_read";
    const TITLE: &'static str = "Read a file in a sandbox";
    type Params = ReadParams;
    type Output = FileReadOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: ReadParams) -> Result<FileReadOutput> {
        check_path("path", &p.path)?;
        let encoding: Encoding = p.encoding.unwrap_or_default().into();
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let file = client
            .call(ReadFile {
                path: p.path,
                encoding,
                max: None,
            })
            .await
            .map_err(not_found_hint)?;
        Ok(FileReadOutput {
            path: file.path,
            encoding: match file.encoding {
                Encoding::Text => "text",
                Encoding::Base64 => "base64",
            }
            .into(),
            content: file.content,
            size: file.size,
        })
    }

    fn summary(out: &FileReadOutput) -> String {
        format!("{} ({} bytes, {}).", out.path, out.size, out.encoding)
    }
}

impl ToolHandler for FilesWrite {
    const NAME: &'static str = "sandbox_files_write";
    const TITLE: &'static str = "Write a file in a sandbox";
    type Params = WriteParams;
    type Output = FileWriteOutput;

    fn annotations() -> ToolAnnotations {
        annotations(false, true, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: WriteParams) -> Result<FileWriteOutput> {
        check_path("path", &p.path)?;
        let bytes = match p.encoding.unwrap_or_default() {
            FileEncoding::Text => p.content.into_bytes(),
            FileEncoding::Base64 => B64.decode(p.content.trim()).map_err(|_| {
                Error::invalid("`content` is not valid base64 (encoding is base64)")
            })?,
        };
        // Refused here rather than by the daemon, which stops reading an oversized body early.
        if bytes.len() as u64 > handoff_wire::WRITE_CAP {
            return Err(Error::invalid(handoff_wire::write_too_large_message(
                bytes.len() as u64,
            )));
        }
        let base64 = B64.encode(bytes);
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let written = client
            .call(WriteFile {
                path: p.path,
                base64,
            })
            .await
            .map_err(not_found_hint)?;
        Ok(FileWriteOutput {
            path: written.path,
            size: written.size,
        })
    }

    fn summary(out: &FileWriteOutput) -> String {
        format!("Wrote {} bytes to {}.", out.size, out.path)
    }
}

impl ToolHandler for FilesList {
    const NAME: &'static str = "sandbox_files_list";
    const TITLE: &'static str = "List a directory in a sandbox";
    type Params = ListFilesParams;
    type Output = FileListOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: ListFilesParams) -> Result<FileListOutput> {
        let path = p.path.unwrap_or_default();
        check_path("path", &path)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let list = client
            .call(ListFiles { path })
            .await
            .map_err(not_found_hint)?;
        Ok(FileListOutput {
            path: list.path,
            entries: list.entries.into_iter().map(Into::into).collect(),
            truncated: list.truncated,
        })
    }

    fn summary(out: &FileListOutput) -> String {
        format!("{}: {} entries.", out.path, out.entries.len())
    }
}

impl ToolHandler for FilesDownloadDir {
    const NAME: &'static str = "sandbox_files_download_dir";
    const TITLE: &'static str = "Download a directory as ZIP";
    type Params = DownloadDirParams;
    type Output = DownloadOutput;

    fn annotations() -> ToolAnnotations {
        annotations(true, false, true, false)
    }

    async fn run(ctx: &Ctx<'_>, p: DownloadDirParams) -> Result<DownloadOutput> {
        let path = p.path.unwrap_or_default();
        check_path("path", &path)?;
        let client = sandbox(ctx, &p.sandbox_id).await?;
        let zipped = client
            .call(ZipDir { path: path.clone() })
            .await
            .map_err(not_found_hint)?;
        let shown = if path.is_empty() {
            "/home/sandbox".to_string()
        } else {
            path
        };
        Ok(DownloadOutput {
            resource_uri: format!(
                "sandbox://{}{}.zip",
                p.sandbox_id,
                normalize_display(&shown)
            ),
            path: shown,
            size_bytes: zipped.size,
            mime_type: "application/zip".into(),
            zip_base64: zipped.base64,
        })
    }

    fn summary(out: &DownloadOutput) -> String {
        format!(
            "{} as a ZIP of {} bytes (embedded resource {}).",
            out.path, out.size_bytes, out.resource_uri
        )
    }

    fn extra_content(out: &DownloadOutput) -> Vec<ContentBlock> {
        vec![ContentBlock::resource(
            ResourceContents::BlobResourceContents {
                uri: out.resource_uri.clone(),
                mime_type: Some(out.mime_type.clone()),
                blob: out.zip_base64.clone(),
                meta: None,
            },
        )]
    }
}

fn normalize_display(path: &str) -> String {
    let trimmed = path.trim_start_matches("/home/sandbox").trim_matches('/');
    if trimmed.is_empty() {
        "/workspace".into()
    } else {
        format!("/{trimmed}")
    }
}
