"""Results and reports name the MLflow store absolutely: `sqlite:///mlflow.db` means nothing to a reader
who does not know where the audit ran."""

from __future__ import annotations

from audit.machinery.tracking import AuditTracker, absolute_tracking_uri


def test_a_relative_sqlite_uri_is_made_absolute_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_tracking_uri("sqlite:///mlflow.db") == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert absolute_tracking_uri("sqlite:///sub/m.db") == f"sqlite:///{tmp_path / 'sub' / 'm.db'}"


def test_absolute_and_server_uris_are_left_alone():
    assert absolute_tracking_uri("sqlite:////srv/mlflow.db") == "sqlite:////srv/mlflow.db"
    assert absolute_tracking_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert absolute_tracking_uri("sqlite:///:memory:") == "sqlite:///:memory:"


def test_the_tracker_records_the_absolute_uri_of_the_default_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tracker = AuditTracker(None, "uri-test")
    assert tracker.tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert (tmp_path / "mlflow.db").is_file()
