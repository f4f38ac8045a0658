//! Reading manifests: a file, or every `.yaml`, `.yml` and `.json` file of a folder (not its
//! subfolders, as controller-runtime reads `CRDDirectoryPaths`), each with any number of
//! documents; a `List` is its items.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;

/// One object read from a manifest file.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// The file it came from.
    pub path: PathBuf,
    /// The object.
    pub object: Value,
}

impl Manifest {
    /// Its `kind`.
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    /// Its `metadata.name`.
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> Error {
    Error::Manifest {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Every object in `paths`, in order (a folder's files by name). Only objects of `kinds`
/// are accepted: another kind is an error naming the file. Kustomize's own files
/// (`kustomization.yaml`, `kustomizeconfig.yaml`) in a folder are skipped.
pub(crate) fn read(paths: &[PathBuf], kinds: &[&str]) -> Result<Vec<Manifest>, Error> {
    let mut manifests = Vec::new();
    for path in paths {
        for file in files(path)? {
            for object in documents(&file)? {
                let manifest = Manifest {
                    path: file.clone(),
                    object,
                };
                if !kinds.contains(&manifest.kind()) {
                    let reason = format!(
                        "a {:?} named {:?}, where only {} are installed from this path",
                        manifest.kind(),
                        manifest.name(),
                        kinds.join(" and ")
                    );
                    return Err(invalid(&file, reason));
                }
                if manifest.name().is_empty() {
                    return Err(invalid(
                        &file,
                        format!("a {} without a name", manifest.kind()),
                    ));
                }
                manifests.push(manifest);
            }
        }
    }
    Ok(manifests)
}

/// `path` itself, or its folder's manifest files sorted by name.
fn files(path: &Path) -> Result<Vec<PathBuf>, Error> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("reading manifests at", path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| Error::io("listing manifests in", path, e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("listing manifests in", path, e))?;
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let manifest = [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e));
        if file.is_file() && manifest && !name.starts_with("kustomiz") {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(invalid(path, "no .yaml, .yml or .json file in this folder"));
    }
    Ok(files)
}

/// The objects of one file: each YAML document (JSON is YAML), a `List` flattened.
fn documents(file: &Path) -> Result<Vec<Value>, Error> {
    let text = std::fs::read_to_string(file).map_err(|e| Error::io("reading", file, e))?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| invalid(file, format!("not YAML or JSON: {e}")))?;
    let mut objects = Vec::new();
    for document in documents {
        let is_list = document["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("List"));
        match document.get("items") {
            Some(Value::Array(items)) if is_list => objects.extend(items.iter().cloned()),
            _ if document.is_object() => objects.push(document),
            _ => return Err(invalid(file, "a document that is not an object")),
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(files: &[(&str, &str)]) -> crate::tempdir::TempDir {
        let dir = crate::tempdir::TempDir::new(false).unwrap();
        for (name, text) in files {
            dir.write(name, text).unwrap();
        }
        dir
    }

    const CRD: &[&str] = &["CustomResourceDefinition"];

    #[test]
    fn a_folder_gives_every_document_of_its_manifest_files_in_name_order() {
        let dir = folder(&[
            (
                "b.yaml",
                "kind: CustomResourceDefinition\nmetadata: {name: b1}\n---\n# empty\n---\nkind: CustomResourceDefinition\nmetadata: {name: b2}\n",
            ),
            (
                "a.json",
                r#"{"kind": "CustomResourceDefinition", "metadata": {"name": "a"}}"#,
            ),
            (
                "c.yml",
                "kind: List\nitems:\n- kind: CustomResourceDefinition\n  metadata: {name: c}\n",
            ),
            ("kustomization.yaml", "resources: [b.yaml]\n"),
            ("notes.txt", "not a manifest"),
        ]);
        let read = read(&[dir.path().to_owned()], CRD).unwrap();
        let names: Vec<&str> = read.iter().map(Manifest::name).collect();
        assert_eq!(names, ["a", "b1", "b2", "c"]);
        assert!(read[1].path.ends_with("b.yaml"));
    }

    #[test]
    fn wrong_kinds_missing_paths_and_broken_yaml_are_errors_naming_the_file() {
        let dir = folder(&[
            ("deploy.yaml", "kind: Deployment\nmetadata: {name: web}\n"),
            ("broken.yaml", "kind: [unclosed\n"),
        ]);
        let wrong = read(&[dir.path().join("deploy.yaml")], CRD)
            .unwrap_err()
            .to_string();
        assert!(
            wrong.contains("deploy.yaml") && wrong.contains("\"Deployment\""),
            "{wrong}"
        );
        let broken = read(&[dir.path().join("broken.yaml")], CRD)
            .unwrap_err()
            .to_string();
        assert!(
            broken.contains("broken.yaml") && broken.contains("not YAML"),
            "{broken}"
        );
        let missing = read(&[dir.path().join("nope")], CRD)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("nope"), "{missing}");
        let empty = folder(&[]);
        let none = read(&[empty.path().to_owned()], CRD)
            .unwrap_err()
            .to_string();
        assert!(none.contains("no .yaml"), "{none}");
    }
}
