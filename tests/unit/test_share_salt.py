"""hack/project.py share-salt: a new tenant stack file takes its platform's encryption salt, so
one command derives one key; an experiment keeps its own, under its tenant's passphrase."""

from __future__ import annotations

from pathlib import Path

import yaml

from project import share_salt

SALT = "v1:cMCn8Wi07uc=:v1:91Rcg9pnp19i7Yzd:k8XyAcRIGtEVHwBlLw7TsCoKB9j5Ag=="


def _write(stacks: Path, stack: str, config: dict[str, object], salt: str | None = None) -> Path:
    path = stacks / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({**({"encryptionsalt": salt} if salt else {}), "config": config}))
    return path


def test_a_tenant_takes_its_platforms_salt_and_an_experiment_keeps_its_own(tmp_path: Path) -> None:
    """An experiment reads no other stack, and its secrets are its tenant's, under the tenant's
    passphrase (docs/security.md "Security model"): it never takes the platform team's salt."""
    _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"}, SALT)
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:kind": "tenant", "tfk8s:platformStack": "platform-dev"})
    experiment = _write(tmp_path, "dev", {"tfk8s:kind": "experiment", "tfk8s:namespace": "tfk8s-alice"})
    before = yaml.safe_load(tenant.read_text())["config"]
    assert share_salt(tenant) == SALT
    assert yaml.safe_load(tenant.read_text()) == {"encryptionsalt": SALT, "config": before}  # nothing else changed
    text = experiment.read_text()
    assert share_salt(experiment) is None and experiment.read_text() == text


def test_a_stack_that_has_a_salt_keeps_it(tmp_path: Path) -> None:
    _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"}, SALT)
    own = "v1:AAAAAAAAAAA=:v1:BBBBBBBBBBBBBBBB:CCCC"
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:platformStack": "platform-dev"}, own)
    text = tenant.read_text()
    assert share_salt(tenant) == own and tenant.read_text() == text


def test_without_a_salted_upstream_pulumi_makes_one_as_always(tmp_path: Path) -> None:
    platform = _write(tmp_path, "platform-dev", {"tfk8s:kind": "platform"})
    tenant = _write(tmp_path, "tenant-alice", {"tfk8s:platformStack": "platform-dev"})
    missing = _write(tmp_path, "tenant-bob", {"tfk8s:platformStack": "platform-gone"})
    for path in (platform, tenant, missing):
        text = path.read_text()
        assert share_salt(path) is None and path.read_text() == text
