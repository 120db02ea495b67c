"""Every shell block of the README and the docs site is accounted for: a test or CI runs it as
written (extracted from the Markdown: tests/e2e/command_blocks.py), or this file says why it
cannot run here. A new block, or a block whose first command changed, fails until it is placed
in one of the two; an entry whose block is gone fails too, so the list never claims more than
the docs hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from doc_blocks import Block, shell_blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# (page, first command) -> the file that runs the block as written. That file must name the page.
RUN = {
    ("README.md", "make up"): ".ci/run",
    ("README.md", "hack/cluster.sh user-kubeconfig alice >/dev/null"): "tests/e2e/test_docs_blocks.py",
    ("README.md", "make up-real-node"): "tests/e2e/test_real_demo.py",
    ("docs/guide/usage.md", 'eval "$(make env)"'): "tests/e2e/test_docs_blocks.py",
    ("docs/guide/status.md", "tfk8s status --stack dev"): "tests/e2e/test_real_demo.py",
    ("docs/guide/package.md", "hack/tools.sh yaml-host"): "tests/e2e/test_yaml_package.py",
}

ELSEWHERE = "a cluster and an account of its own"
EXAMPLES = "the page's example stacks are checked by tests/unit/test_cluster_examples.py"
# (page, first command, or None for every block of the page) -> why no test runs it here.
NOT_RUN: dict[tuple[str, str | None], str] = {
    ("README.md", "tfk8s status --stack alice-cifar --watch"): (
        "needs a real User Node; the same commands on the dev stack are status.md's first block, "
        "which tests/e2e/test_real_demo.py runs"
    ),
    ("docs/index.md", "make up"): "the README's quick start, which .ci/run runs",
    ("docs/contributing.md", "make venv"): ".ci/run runs make venv, make lint and make test; make test-unit is part of make test",
    ("docs/benchmarks.md", None): "a benchmark, minutes to hours; its figures are the page's",
    (
        "docs/clusters/eks.md",
        None,
    ): f"AWS: {ELSEWHERE}; {EXAMPLES}",
    (
        "docs/clusters/gke.md",
        None,
    ): f"GKE: {ELSEWHERE}; {EXAMPLES}",
    ("docs/clusters/kubeadm.md", None): (f"an on-premises cluster and registry: {ELSEWHERE}; {EXAMPLES}"),
    ("docs/concepts/architecture.md", "pulumi config set --path 'tfk8s:clusters[0].run.number' 1"): (
        "runs in whichever experiment stack the reader has selected; "
        "tests/e2e/test_ps_reclaim.py makes the same change to a failed run"
    ),
    ("docs/guide/doctor.md", "tfk8s doctor --stack platform-prod"): (
        "platform-prod stands for a team's own stack; tests/e2e/test_doctor_on_clusters.py runs the command on "
        "platform-dev and on stack files of its own"
    ),
    (
        "docs/guide/gitops.md",
        None,
    ): ("a synopsis with placeholders (<sha>, a bucket, a git URL); tests/e2e/test_gitops.py runs its commands"),
    ("docs/guide/library.md", "pip install /path/to/tfk8s"): "a placeholder path; tests/unit/test_library.py installs the wheel",
    ("docs/guide/library.md", "python -m venv venv && venv/bin/pip install -r requirements.txt"): (
        "installs from the package index; tests/e2e/test_example_program.py runs the example's stack init and up "
        "with a virtualenv linked to the suite's"
    ),
    ("docs/guide/status.md", "pulumi up --refresh --yes --stack dev && pulumi stack output readiness --stack dev"): (
        "at the project's root it applies stacks/Pulumi.dev.yaml, whose sizes the real-node demo changes in its "
        "own copy (.state/demo); readiness from live status is tests/e2e/test_real_training.py's"
    ),
    ("docs/guide/status.md", 'curl -H "Authorization: token $TFK8S_TOKEN" "$URL/tfk8s/status?experiment=dev"'): (
        "placeholders ($URL, $TFK8S_TOKEN); tests/e2e/test_real_observability.py asks the same endpoints"
    ),
    ("docs/security.md", "make policy-venv"): (
        "previews the README's alice-cifar, which the README's block destroys; "
        "tests/e2e/test_policy_pack.py previews stacks with the pack"
    ),
}

BLOCKS = [block for page in PAGES for block in shell_blocks(page)]


def page_of(block: Block) -> str:
    return block.markdown.relative_to(ROOT).as_posix()


def accounted(block: Block) -> str | None:
    key = (page_of(block), block.first_command)
    return RUN.get(key) or NOT_RUN.get(key) or NOT_RUN.get((key[0], None))


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{page_of(b)}:{b.first_command[:40]}")
def test_every_shell_block_is_run_or_says_why_not(block: Block) -> None:
    assert accounted(block), (
        f"{page_of(block)} (under {block.heading!r}): the block starting `{block.first_command}` is neither run by "
        "a test (RUN) nor said not to be runnable here and why (NOT_RUN) in tests/unit/test_docs_blocks_accounted.py"
    )


def test_each_entry_names_a_block_the_docs_still_hold() -> None:
    held = {(page_of(b), b.first_command) for b in BLOCKS} | {(page_of(b), None) for b in BLOCKS}
    stale = [key for key in [*RUN, *NOT_RUN] if key not in held]
    assert stale == [], f"entries whose block is gone or changed its first command: {stale}"


@pytest.mark.parametrize(("page", "runner"), [(page, runner) for (page, _), runner in RUN.items()])
def test_the_file_said_to_run_a_block_exists_and_names_its_page(page: str, runner: str) -> None:
    text = (ROOT / runner).read_text()
    name = "README" if page == "README.md" else Path(page).name
    assert name in text, f"{runner} is said to run a block of {page}, and never names it"
