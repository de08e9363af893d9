"""``bayeval bench …``: the experiments that reproduce the papers' tables."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from bayeval.cli.common import (
    FilterOption,
    MetricOption,
    RepeatedModels,
    RepeatedModelsOption,
    TaskOption,
    bench_app,
    comma_list,
    err,
    fail,
    interrupted,
    progress_bar,
    setup_jax,
)
from bayeval.cli.numbers import CheckedCommand
from bayeval.errors import BayevalError
from bayeval.experiments.inputs import bench_sources, parse_shares

if TYPE_CHECKING:
    from bayeval.experiments.units import Executor


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not left at its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


BUNDLED = ("datasets", "dataset", "suite")  # the bench options naming bundled data


def _refuse_both(ctx: typer.Context) -> None:
    """--reference replaces the bundled data: giving both would run one silently."""
    for name in BUNDLED:
        if _given(ctx, name) and _given(ctx, "reference"):
            raise typer.BadParameter(f"give either --{name} or --reference, not both")


def own_reference(ctx: typer.Context, value: Path | None) -> Path | None:
    """--reference's check: not with --datasets."""
    _refuse_both(ctx)
    return value


def bundled_names(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """Refuse, before any work, a --datasets / --suite value naming a dataset that is not
    bundled, and --datasets with --reference."""
    from bayeval.experiments.inputs import bundled_names as check

    if param.name in BUNDLED:
        _refuse_both(ctx)
    try:
        check(value)
    except BayevalError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


# options of the estimation-protocol benches (the BayesAME paper)
DatasetsOption = Annotated[str, typer.Option("--datasets", callback=bundled_names,
                                             help="Comma-separated bundled datasets.")]
AllDatasetsOption = Annotated[str, typer.Option(
    "--datasets", callback=bundled_names,
    help="Comma-separated bundled datasets, or 'all'.")]
BenchReferenceOption = Annotated[Path | None, typer.Option(
    "--reference", callback=own_reference,
    help="Your own score matrix (.npz, .csv or .parquet, lm-eval:DIR with --task, or "
         "inspect:LOG_DIR) to run on, instead of the bundled data.")]


def bench_log(line: str) -> None:
    """A bench's progress line on stderr with the time of day, whole (not wrapped at the
    console's width: a log is read line by line)."""
    err.print(f"[{time.strftime('%H:%M:%S')}] {line}", highlight=False, soft_wrap=True)


# where a bench's cached units run (bayeval.experiments.units)
ExecutorOption = Annotated[str, typer.Option(
    "--executor", help="Where the bench's units of work run: 'local' (this machine; "
                       "--workers processes) or 'ray' (a Ray cluster at --address, or a "
                       "local Ray with --workers CPUs; pip install 'bayeval[ray]').")]
WorkersOption = Annotated[int, typer.Option(
    "--workers", min=1, help="Worker processes (local, each pinned to a core) or CPUs "
                             "(a local Ray). 1: everything in this process.")]
AddressOption = Annotated[str | None, typer.Option(
    "--address", help="Address of a running Ray cluster (with --executor ray), e.g. "
                      "ray://head:10001 or auto.")]


@dataclass(frozen=True)
class BenchRun:
    """What a bench gets from the options every bench shares: where its units run, and
    the user's matrix options (--reference, --task, …) that replace the bundled data."""

    where: Executor
    data: dict[str, Any]

    def sources(self, datasets: str) -> list:
        """What the bench runs on (:func:`~bayeval.experiments.inputs.bench_sources`)."""
        return bench_sources(datasets, **self.data)


_DATA = (("reference", BenchReferenceOption, None),
         ("repeated_models", RepeatedModelsOption, RepeatedModels.error),
         ("task", TaskOption, None), ("metric", MetricOption, None),
         ("filter_name", FilterOption, None))
_WHERE = (("executor", ExecutorOption, "local"), ("workers", WorkersOption, 1),
          ("address", AddressOption, None))


def bench_command(name: str, own_data: bool = True) -> Callable[[Callable], Callable]:
    """Register a bench whose function takes ``run`` (:class:`BenchRun`) for the options
    every bench shares: --reference, --repeated-models, --task, --metric, --filter after
    its first option (with ``own_data``), --executor, --workers, --address before --out;
    the executor is checked before any work."""
    def register(command: Callable) -> Callable:
        params = [p for p in inspect.signature(command, eval_str=True).parameters.values()
                  if p.name != "run"]

        def shared(options: tuple) -> list[inspect.Parameter]:
            return [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                      annotation=a, default=d) for n, a, d in options]

        first = 1 + (params[0].name == "ctx")
        out = next(k for k, p in enumerate(params) if p.name == "out")
        params = [*params[:first], *(shared(_DATA) if own_data else []),
                  *params[first:out], *shared(_WHERE), *params[out:]]

        @functools.wraps(command)
        def call(**options: Any) -> None:
            from bayeval.experiments.units import Executor

            try:  # checked before any work
                where = Executor(*(options.pop(n) for n, _, _ in _WHERE))
            except BayevalError as exc:
                raise fail(str(exc)) from None
            data = {n: options.pop(n) for n, _, _ in _DATA if n in options}
            try:
                command(**options, run=BenchRun(where, data))
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: the finished units stay
                raise interrupted(exc, f"the finished units are kept under {options['out']}"
                                       "/units: the same command continues") from None

        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in params}
        return bench_app.command(name, cls=CheckedCommand)(call)
    return register


RegimesOption = Annotated[str, typer.Option(
    help="Comma-separated: interpolation, extrapolation.")]
SeedsOption = Annotated[int, typer.Option(
    help="Seeds: each draws its own reference subset and selection.")]
ReferenceFractionOption = Annotated[float, typer.Option(
    help="Share of the pool used as reference models.")]
SplitSeedOption = Annotated[int, typer.Option(help="Seed of the target draw.")]
# the validity and suite benches' draws: seeds of (targets, references), runs per target
DrawsOption = Annotated[int, typer.Option(min=1, help="Draws of targets and reference models.")]
RepsOption = Annotated[int, typer.Option(min=1, help="Runs per target (selection seeds).")]


@bench_command("estimation")
def bench_estimation(
    datasets: DatasetsOption = "ifeval",
    regimes: RegimesOption = "interpolation,extrapolation",
    methods: Annotated[str, typer.Option(
        help="Comma-separated method specs: name or name(key=value, ...), e.g. "
             "'bayesame,bayesame(refit_every=0)'.")] = "bayesame,bayesame-rs,random,bayes-aipw",
    targets: Annotated[int, typer.Option(help="Target models per regime.")] = 10,
    seeds: SeedsOption = 20,
    reference_fraction: ReferenceFractionOption = 0.5,
    split_seed: SplitSeedOption = 0,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, plots, report.md, runs/ "
                                           "and units/.")
                   ] = Path("results/estimation"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """The BayesAME paper's estimation experiment: RMSE(n), integrated RMSE, gain over RS-Mean and
    cost–accuracy of the two-condition rule, for every method, full-length runs. Every
    (regime, method, seed) is saved under OUT/units as soon as it is done and reused by a
    rerun with the same settings; --workers or --executor ray spread them."""
    from bayeval.experiments.estimation import run_estimation_bench
    from bayeval.methods import split_method_specs

    try:
        sources = run.sources(datasets)
        setup_jax()
        report = run_estimation_bench(sources, comma_list(regimes),
                                      split_method_specs(methods), targets, seeds,
                                      reference_fraction, split_seed, out, run.where, bench_log)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    print(report.read_text())
    err.print(f"wrote {out}/rmse_curves.csv, cost_accuracy.csv, irmse.csv, estimation.png, "
              "report.md")


@bench_command("inference")
def bench_inference(
    dataset: Annotated[str, typer.Option(
        "--dataset", "--datasets", callback=bundled_names,
        help="One bundled dataset (--datasets, as the other benches spell it, is the "
             "same option).")] = "ifeval",
    regime: Annotated[str, typer.Option(help="interpolation or extrapolation.")
                      ] = "interpolation",
    methods: Annotated[str, typer.Option(
        help="Comma-separated method specs, e.g. 'bayesame,bayesame-laplace,irt,"
             "irt(num_chains=2)'.")] = "bayesame,bayesame-laplace,irt(interval=posterior)",
    seeds: SeedsOption = 5,
    targets: Annotated[int, typer.Option(help="Target models.")] = 10,
    steps: Annotated[int, typer.Option(help="Evaluations per run.")] = 300,
    every: Annotated[int, typer.Option(help="Report RMSE every this many items.")] = 50,
    reference_fraction: ReferenceFractionOption = 0.5,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, inference.png and "
                                           "report.md.")] = Path("results/inference"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """Gaussian BayesAME (exact), the Bernoulli-logit bucket GP (Laplace) and 2PL IRT
    (NUTS) on one estimation task: RMSE every EVERY items, wall time, and every NUTS fit's
    R-hat, ESS, divergences and seconds. Every (method, seed) is saved under OUT/units as
    it finishes and reused by a rerun with the same settings (with the seconds it took);
    --workers or --executor ray spread them."""
    from bayeval.experiments.inference import run_inference_comparison, write_report
    from bayeval.methods import split_method_specs

    if "," in dataset:
        raise fail(f"--dataset {dataset}: bench inference compares backends on one dataset; "
                   "give one name")
    try:
        [source] = run.sources(dataset)
        setup_jax()
        curves, fits, timing = run_inference_comparison(
            source, regime, split_method_specs(methods), seeds=seeds, n_targets=targets,
            n_steps=steps, reference_fraction=reference_fraction,
            log=bench_log, runs_dir=out / "runs",
            out=out, executor=run.where)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    print(write_report(curves, fits, timing, out, every).read_text())
    err.print(f"wrote {out}/rmse_curves.csv, mcmc_fits.csv, timing.csv, inference.png, "
              "report.md")


@bench_command("multitarget")
def bench_multitarget(
    datasets: DatasetsOption = "ifeval",
    regimes: RegimesOption = "interpolation,extrapolation",
    targets: Annotated[int, typer.Option(help="Targets evaluated jointly.")] = 5,
    seeds: SeedsOption = 10,
    epsilon: Annotated[float, typer.Option(
        help="ε2 of the two-condition rule (interval width).")] = 0.02,
    refit_every: Annotated[int, typer.Option(
        help="Re-fit the joint hyperparameters every this many evaluations (all targets) "
             "after the initial design.")] = 250,
    selection: Annotated[str, typer.Option(
        help="round_robin (per-target IG) or mean_ig.")] = "round_robin",
    reference_fraction: ReferenceFractionOption = 0.5,
    split_seed: SplitSeedOption = 0,
    out: Annotated[Path, typer.Option(help="Folder for CSV files, the plot and report.md; "
                                           "raw runs go to OUT/units and are reused.")
                   ] = Path("results/multitarget"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """Multi-target vs independent single-target BayesAME: total evaluations until every
    target stops at ε2, RMSE and coverage then, and RMSE against total evaluations. Every
    (regime, seed) is saved under OUT/units as it finishes and reused by a rerun with the
    same settings; --workers or --executor ray spread them."""
    from bayeval.experiments.multitarget import run_multitarget_bench

    try:
        sources = run.sources(datasets)
        setup_jax()
        report = run_multitarget_bench(
            sources, comma_list(regimes), targets, seeds, reference_fraction, split_seed,
            epsilon, {"refit_every": refit_every, "selection": selection}, out, run.where,
            bench_log)
    except BayevalError as exc:
        raise fail(str(exc)) from None
    print(report.read_text())
    err.print(f"wrote {out}/costs.csv, cost_table.csv, rmse_vs_evaluations.csv, "
              "multitarget.png, report.md")


@bench_command("selection")
def bench_selection(
    datasets: AllDatasetsOption = "all",
    runs: Annotated[int, typer.Option(help="Runs (seeds) per algorithm and budget.")] = 1000,
    max_budget: Annotated[float, typer.Option(
        help="Largest budget fraction of the grid (1%…100% plus 1.25…5.5%).")] = 1.0,
    algorithms: Annotated[str, typer.Option(
        help="Comma-separated: SR, SySRs, UCB-E(a=0.1), UCB-E(a=1), UCB-E(a=10), "
             "SyUCB-E(a=1), US, SyUS, and with --history-share HI-SySRs (SySRs with the "
             "reference models' factor model as control variate) and HW-SySRs (SySRs "
             "with items drawn where strong reference models disagree).")] = ",".join(
        ("SR", "SySRs", "UCB-E(a=0.1)", "UCB-E(a=1)", "UCB-E(a=10)", "SyUCB-E(a=1)", "US",
         "SyUS")),
    history_share: Annotated[float, typer.Option(
        min=0.0, max=0.9,
        help="Share of each dataset's models held out as reference models (the history); "
             "every algorithm then chooses among the other models only. 0: every model "
             "is a candidate (the SySRs paper's protocol).")] = 0.0,
    splits: Annotated[int, typer.Option(
        min=1, help="Seeded reference/candidate splits the runs are spread over (with "
                    "--history-share).")] = 4,
    out: Annotated[Path, typer.Option(help="Folder for accuracy.csv, selection.png, "
                                           "top_m.png, report.md and units/.")
                   ] = Path("results/selection"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """The SySRs paper's experiment (Cutting LLM Evaluation Costs with SySRs): accuracy
    of identifying the best model, and the top-3/5/10 identification error, against the
    budget, with confidence budgets, for every algorithm
    on the bundled datasets. The runs go in units of at most 250 (dataset, algorithm,
    split); each is saved under OUT/units as soon as it is done and reused by a rerun
    with the same settings, and --workers or --executor ray spread them.

    With --history-share, the models are split into references and candidates, and
    HI-SySRs and HW-SySRs (docs/methods.md §10) use the references' scores:

        bayeval bench selection --history-share 0.5 --algorithms SySRs,HW-SySRs"""
    from bayeval.experiments.selection import run_selection_bench

    try:
        run_selection_bench(
            run.sources(datasets),
            comma_list(algorithms), runs, max_budget, history_share, splits, out, run.where,
            bench_log)
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    print((out / "report.md").read_text())
    err.print(f"wrote {out}/accuracy.csv, selection.png, top_m.png, report.md")


@bench_command("coverage")
def bench_coverage(
    suite: Annotated[str, typer.Option(
        callback=bundled_names,
        help="Bundled dataset or suite of datasets sharing models (a+b).")] = "ifeval+musr",
    history: Annotated[str, typer.Option(
        help="'full' (fully observed history) or 'mcar' (--full-rows whole rows, every "
             "other entry kept with probability --p-obs).")] = "full",
    budgets: Annotated[str, typer.Option(
        help="Comma-separated budget shares of the items.")] = ",".join(
        f"{b:g}" for b in (0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25)),
    seeds: Annotated[int, typer.Option(help="Seeds per new model.")] = 100,
    val_seeds: Annotated[int, typer.Option(help="Seeds per validation model in tuning.")] = 5,
    full_rows: Annotated[int, typer.Option(help="Fully observed rows (mcar).")] = 50,
    p_obs: Annotated[float, typer.Option(help="Share of other entries kept (mcar).")] = 0.1,
    split_seed: Annotated[int, typer.Option(help="Seed of the historical/new split.")] = 0,
    factor_selection: Annotated[str, typer.Option(
        help="How CV picks (k, λ): 'one-se' (the 1-SE rule) or 'best' (highest mean "
             "accuracy).")] = "one-se",
    grid: Annotated[Literal["full", "default"], typer.Option(
        help="Policy tuning grid: 'full' (β0, ρ, γ, τ) or 'default' (ρ, γ only, with the "
             "robust (β0, τ) = (1, 0.05)).")] = "full",
    out: Annotated[Path, typer.Option(help="Folder for results.csv, report.md, coverage.png, "
                                           "cv.json, tuning.csv and units/.")
                   ] = Path("results/coverage"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """The FAQ paper's experiment (Efficient Evaluation of LLM Performance with Statistical
    Guarantees): coverage, mean width and ESS multiplier over uniform of
    FAQ's 95% interval (tuned and robust-default policy) per budget; models split 50/50
    into history and new, everything tuned on historical models only. The CV, each
    budget's tuning and each (budget, configuration)'s runs are saved under OUT/units as
    they finish and reused by a rerun with the same settings; --workers or --executor ray
    spread them."""
    from bayeval.experiments.coverage import run_coverage_bench

    try:
        [source] = run.sources(suite)
        shares = parse_shares("--budgets", budgets, "budget must be a share")
        with progress_bar("simulating") as bar:
            runs = bar.add_task("runs", total=None, status="")
            report = run_coverage_bench(
                source, shares, grid, history, full_rows, p_obs, split_seed, seeds,
                val_seeds, factor_selection, out, run.where,
                log=lambda line: bar.console.print(f"[{time.strftime('%H:%M:%S')}] {line}",
                                                   highlight=False),
                progress=lambda label, done, total: bar.update(
                    runs, completed=done, total=total, status=label))
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    print(report.read_text())
    err.print(f"wrote {out}/results.csv, report.md, coverage.png")


@bench_command("compression")
def bench_compression(
    datasets: AllDatasetsOption = "all",
    seeds: Annotated[int, typer.Option(help="Seeds (model splits) for random and "
                                            "BestRand.")] = 200,
    kmeans_seeds: Annotated[int, typer.Option(help="Seeds for the k-means baseline.")] = 20,
    mince_seeds: Annotated[int, typer.Option(help="Seeds for MINCE (calibration draws).")
                           ] = 10,
    ablation: Annotated[bool, typer.Option(help="Also run the BestRand ablation "
                                                "(100 seeds, 5% and 10%).")] = True,
    out: Annotated[Path, typer.Option(help="Folder for results.csv, mince.csv, "
                                           "error_tails.png, report.md and units/.")
                   ] = Path("results/compression"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """The BestRand and MINCE experiments: random, BestRand and k-means subsets at 2–50% retention
    (MAE, high-error risk) and MINCE's size and drift, with references and targets split
    by model. Each dataset's subset table, MINCE table and ablation is saved under
    OUT/units as it finishes and reused by a rerun with the same settings; --workers or
    --executor ray spread them."""
    from bayeval.experiments.compression import run_compression_bench

    try:
        names = run.sources(datasets)
        run_compression_bench(names, out, seeds, kmeans_seeds, mince_seeds, ablation,
                              log=bench_log,
                              executor=run.where)
    except (BayevalError, ValueError) as exc:  # e.g. too few items for MINCE's sizes
        raise fail(str(exc)) from None
    print((out / "report.md").read_text())
    err.print(f"wrote {out}/results.csv, mince.csv, error_tails.png, report.md")


@bench_command("validity")
def bench_validity(
    datasets: DatasetsOption = "ifeval",
    variants: Annotated[str, typer.Option(
        help="Comma-separated: standard (random targets), extremes (targets from the "
             "bottom and top 5% of models), sparse (items fewer than 10% of models "
             "solve), extrapolation (targets from the strongest 30%, the weakest half "
             "as references).")] = "standard,extremes,sparse",
    epsilons: Annotated[str, typer.Option(
        help="Comma-separated interval widths ε at which the methods stop.")] = "0.02,0.05,0.1",
    methods: Annotated[str, typer.Option(
        help="Comma-separated method specs; 'random' (RS-Mean) is the reference of the "
             "saving and is always run.")] = "active-pai,active-pai(anytime=true),random",
    seeds: DrawsOption = 10,
    targets: Annotated[int, typer.Option(min=2, help="Targets per draw.")] = 20,
    reps: RepsOption = 5,
    reference_fraction: ReferenceFractionOption = 0.5,
    faq: Annotated[bool, typer.Option(
        help="Also run FAQ with the first method's mean stopping n as its budget.")] = True,
    concurrency: Annotated[int, typer.Option(
        min=1, help="Run the design-based methods with K evaluations in flight, each "
                    "finishing after an Exp(1) time (streaming draws); RS-Mean and FAQ "
                    "run one item at a time.")] = 1,
    batch: Annotated[int, typer.Option(
        min=1, help="Run the design-based methods in batches of k items drawn from one "
                    "state (a harness launch per batch).")] = 1,
    calls: Annotated[str, typer.Option(
        help="With --batch: how the calls are sized: fixed (every call k items), taper "
             "(the last calls cut to the items the interval's width predicts are still "
             "needed), grow (8 items first, doubling, and the taper), fine (as grow, asking "
             "half the items predicted left, down to 2), or key=value pairs "
             "of first, rate, taper, smallest (docs/methods.md §9 \"Call sizes\"); with "
             "--concurrency the taper caps the evaluations in flight near the stop.")
    ] = "fixed",
    out: Annotated[Path, typer.Option(help="Folder for results.csv, faq.csv, validity.png, "
                                           "report.md and the per-run CSVs.")
                   ] = Path("results/validity"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """Design-valid active estimation (docs/methods.md §9): coverage of the interval at the
    automatic stop ± SE per dataset, variant, ε and score stratum; items at the stop and
    the saving against RS-Mean at the same ε; width at equal items against FAQ. Every
    (variant, ε, method, seed) is saved under OUT/units as it finishes and reused by a
    rerun with the same settings; --workers or --executor ray spread them."""
    from bayeval.experiments.validity import run_validity_bench
    from bayeval.methods import split_method_specs

    try:
        sources = run.sources(datasets)
        setup_jax()
        report = run_validity_bench(
            sources, comma_list(variants), epsilons, split_method_specs(methods), seeds,
            targets, reps, reference_fraction, faq, out, run.where, bench_log, concurrency,
            batch, calls)
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    print(report.read_text())
    err.print(f"wrote {out}/results.csv, faq.csv, validity.png, report.md")


@bench_command("suite", own_data=False)
def bench_suite(
    ctx: typer.Context,
    suites: Annotated[str, typer.Option(
        help="Comma-separated suites: leaderboard (IFEval, MuSR, ARC of the Open LLM "
             "Leaderboard), helm_lite (commonsense, MATH, MMLU), musr_subtasks (MuSR's "
             "three subtasks, size-weighted: evaluate --subtasks), or bundled datasets "
             "joined by '+' (their rows matched by model id, or row by row where they "
             "share no id), e.g. ifeval+musr.")] = "leaderboard,helm_lite,musr_subtasks",
    epsilons: Annotated[str, typer.Option(
        help="Comma-separated widths ε of the average's interval at which the suites "
             "stop.")] = "0.02,0.05,0.1",
    method: Annotated[str, typer.Option(
        help="The design-valid method each task runs.")] = "active-pai",
    references: Annotated[list[Path] | None, typer.Option(
        "--reference", metavar="FILE",
        help="Your own score matrices as one suite's tasks (give it once per task, two or "
             "more: .npz, .csv or .parquet), instead of --suites; their rows are one "
             "model by id (see --rows).")] = None,
    rows: Annotated[str, typer.Option(
        help="With --reference: how the tasks' rows are matched, 'id' (by model id), "
             "'order' (row i of every file is one model) or 'auto' (by id where the "
             "files share ids, else by order).")] = "auto",
    seeds: DrawsOption = 10,
    targets: Annotated[int, typer.Option(min=1, help="Targets per draw.")] = 20,
    reps: RepsOption = 5,
    reference_fraction: ReferenceFractionOption = 0.5,
    out: Annotated[Path, typer.Option(help="Folder for results.csv, strata.csv, runs.csv, "
                                           "suite.png and report.md.")
                   ] = Path("results/suite"),
    *, run: BenchRun,  # the options every bench shares (bench_command)
) -> None:
    """Suites with one budget (docs/methods.md §9 "Suites"): coverage of the average's and
    every task's interval at the stop ± SE (per task and score range too), and the items
    against independent per-task runs at the same average width and against uniform
    sampling with the same allocation and stop. Every (suite, task, method, seed) is
    saved under OUT/units as it finishes and reused by a rerun."""
    from bayeval.experiments.suite import run_suite_bench, suite_inputs, write_report

    try:
        eps = parse_shares("--epsilons", epsilons, "ε must be")
        chosen, matrices = suite_inputs(suites, references, rows, _given(ctx, "suites"))
        setup_jax()
        runs = run_suite_bench(chosen, eps, seeds, targets, reps, reference_fraction,
                               method, out=out, executor=run.where, log=bench_log,
                               matrices=matrices, rows=rows)
    except (BayevalError, ValueError) as exc:
        raise fail(str(exc)) from None
    runs.to_csv(out / "runs.csv", index=False)
    report = write_report(runs, out)
    print(report.read_text())
    err.print(f"wrote {out}/results.csv, strata.csv, runs.csv, suite.png, report.md")
