"""GitOps for tfk8s stacks: the stack files in git are the truth, and one command turns a change of
them into Pulumi operations (docs/guide/gitops.md).

- `plan`: which stacks a change from a base commit to a head commit touches, and in what order;
- `engine`: the plain `pulumi` CLI on one stack, its engine events read back;
- `pipeline`: preview (a pull request), apply (a merge), drift (a schedule);
- `summary`: one Markdown report per run, fit for a pull-request comment;
- `operator`: the Pulumi Kubernetes Operator's `Stack` for teams that reconcile in-cluster.

Run as `tfk8s-gitops` (the console script `pip install` makes), or in a checkout as `hack/gitops.sh`,
which checks the pipeline's environment first. Nothing here is imported by the Pulumi program.
"""
