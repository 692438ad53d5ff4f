"""``voxserve bench ...``: side-by-side benchmarks against peers, in one process run (``bench diarize`` and
``bench scale`` register on the same group from their own modules)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from voxserve.bench.common import write_report
from voxserve.cli.common import add_engine_args, engine_settings
from voxserve.errors import InvalidInput
from voxserve.service import Voxserve


def add_bench_commands(sub: Any) -> Any:
    """Register ``voxserve bench`` and its subcommands here; returns the group, for the others to join."""
    bench = sub.add_parser("bench", help="benchmarks against peer systems")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)
    for add in (_add_longform, _add_server, _add_tts, _add_live, _add_agent, _add_soak, _add_longform_process, _add_make_long):
        add(bench_sub)
    return bench_sub


def _add_longform(bench_sub: Any) -> None:
    """``voxserve bench longform``."""
    p = bench_sub.add_parser("longform", help="long files: voxserve vs faster-whisper sequential and batched")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--peer-batch-sizes", default="4,8,16")
    p.add_argument("--language", help="pass a language to every system (default: each detects it)")
    p.add_argument("--no-words", action="store_true", help="no word timestamps for any system")
    p.add_argument("--json", help="write the report here")
    add_engine_args(p)
    p.set_defaults(func=cmd_longform)


def _add_server(bench_sub: Any) -> None:
    """``voxserve bench server``."""
    srv = bench_sub.add_parser("server", help="concurrent HTTP clients vs faster-whisper per request")
    srv.add_argument("files", nargs="*", metavar="FILE", help="audio files (default: the corpus asr/ clips)")
    srv.add_argument("--clients", default="1,8", help="comma-separated client counts")
    srv.add_argument("--requests", type=int, default=8, help="requests per client")
    srv.add_argument("--json", help="write the report here")
    add_engine_args(srv)
    srv.set_defaults(func=cmd_server)


def _add_tts(bench_sub: Any) -> None:
    """``voxserve bench tts``."""
    t = bench_sub.add_parser("tts", help="streaming synthesis: TTFB and real-time streams vs Piper per request")
    t.add_argument("--streams", type=int, default=16, help="the highest number of concurrent streams tried")
    t.add_argument("--voice", help="a Piper voice (default: the configured voice)")
    t.add_argument("--text", help="what every client asks for (default: a 6-sentence paragraph)")
    t.add_argument("--ramp-s", type=float, default=1.0, help="clients start within this many seconds")
    t.add_argument("--ttfb-budget-ms", type=float, default=500.0,
                   help="p95 playback delay (TTFB + client buffer) a level must meet for the admission limit")
    t.add_argument("--client-buffer-ms", type=float, default=250.0, help="jitter buffer of the buffered listener")
    t.add_argument("--refine", type=int, default=2, help="bisection steps after the first failing level")
    t.add_argument("--levels", help="run exactly these stream counts (e.g. 8,16) instead of searching")
    t.add_argument("--rates", help="goodput mode: requests arriving at random (Poisson) at these rates per second "
                   "(e.g. 2,4,8), one sentence each over HTTP, vs Piper per request at the same times")
    t.add_argument("--seconds", type=float, default=30.0, help="goodput mode: how long requests arrive at each rate")
    t.add_argument("--seed", type=int, default=0, help="goodput mode: seed of the arrival times and sentences")
    t.add_argument("--no-baseline", action="store_true", help="goodput mode: voxserve only (to compare settings)")
    t.add_argument("--text-stream", action="store_true", help="text streamed in: replies sent to the speech "
                   "WebSocket as deltas at an LLM's pace; first delta -> first audio vs sending the whole reply")
    t.add_argument("--token-rates", default="15,40", help="text-stream mode: fixed replays, tokens (~4 chars) per second")
    t.add_argument("--replies", type=int, default=20, help="text-stream mode: replies per pace (at most 20)")
    t.add_argument("--no-llm", action="store_true", help="text-stream mode: no replies recorded from the embedded LLM")
    t.add_argument("--wait-ms", type=float, help="text-stream mode: first_segment_wait_ms of the 'wait' mode "
                   "(default: the agent's; negative: leave that mode out)")
    t.add_argument("--config", help="settings file (TOML or JSON)")
    t.add_argument("--json", help="write the report here")
    t.set_defaults(func=cmd_tts)


def _add_live(bench_sub: Any) -> None:
    """``voxserve bench live``."""
    lv = bench_sub.add_parser("live", help="simulated microphones over WebSockets (vs WhisperLive)")
    lv.add_argument("--streams", default="1,2,4,8", help="comma-separated concurrency levels")
    lv.add_argument("--seconds", type=float, default=30.0, help="audio per stream")
    lv.add_argument("--corpus", help="corpus folder (default: ../shared/corpus, else tests/data)")
    lv.add_argument("--half", choices=("tune", "check"), help="only clips of this half of the corpus split")
    lv.add_argument("--whisperlive-python", help="a Python with whisper-live installed, to run it side by side")
    lv.add_argument("--json", help="write the report here")
    add_engine_args(lv)
    lv.set_defaults(func=cmd_live)


def _add_agent(bench_sub: Any) -> None:
    """``voxserve bench agent``."""
    ag = bench_sub.add_parser("agent", help="voice agent: end of speech -> first reply audio over spoken turns")
    ag.add_argument("--rounds", type=int, default=2, help="conversations of the scripted turns (fresh sessions)")
    ag.add_argument("--knowledge", help="knowledge folder (default: the built-in sample the turns ask about)")
    ag.add_argument("--llm-url", help="an OpenAI-compatible chat endpoint instead of the embedded LLM")
    ag.add_argument("--voice", help="the voice that speaks the questions")
    ag.add_argument("--json", help="write the report here")
    add_engine_args(ag)
    ag.set_defaults(func=cmd_agent)


def _add_soak(bench_sub: Any) -> None:
    """``voxserve bench soak``."""
    sk = bench_sub.add_parser("soak", help="live streams at real-time pace + uploads for a while: no text lost or "
                              "mixed, memory and fds back to baseline (docs/reliability.md)")
    sk.add_argument("--streams", type=int, default=4, help="concurrent live streams")
    sk.add_argument("--seconds", type=float, default=20.0, help="audio each stream plays, in real time")
    sk.add_argument("--slow", type=float, default=0.25, help="fraction of streams that read slowly")
    sk.add_argument("--vanish", type=float, default=0.25, help="fraction of streams that drop their connection")
    sk.add_argument("--uploads", type=int, default=1, help="concurrent upload clients")
    sk.add_argument("--model", help="the server's model (default: its default)")
    sk.add_argument("--url", help="soak this running server instead of a private one")
    sk.add_argument("--pid", type=int, help="that server's process id (to measure its RSS and fds)")
    sk.add_argument("--json", help="write the report here")
    sk.set_defaults(func=cmd_soak)


def _add_longform_process(bench_sub: Any) -> None:
    """``voxserve bench longform-process``."""
    pl = bench_sub.add_parser("longform-process", help="whole processes: the voxserve CLI vs a faster-whisper script")
    pl.add_argument("files", nargs="+", metavar="FILE")
    pl.add_argument("--repeats", type=int, default=3)
    pl.add_argument("--peer-batch-sizes", default="8,16")
    pl.add_argument("--words", action="store_true", help="both produce word timestamps (voxserve: --format srt)")
    pl.add_argument("--json", help="write the report here")
    pl.set_defaults(func=cmd_longform_process)


def _add_make_long(bench_sub: Any) -> None:
    """``voxserve bench make-long``."""
    m = bench_sub.add_parser("make-long", help="join corpus clips with silences into a long test file")
    m.add_argument("--corpus", help="corpus folder (default: ../shared/corpus)")
    m.add_argument("--out", required=True)
    m.add_argument("--minutes", type=float, default=10.0)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--half", choices=("tune", "check"), help="only clips of this half of the corpus split")
    m.set_defaults(func=cmd_make_long)


def cmd_longform(args: argparse.Namespace) -> int:
    """Run the long-file benchmark and print its table."""
    from voxserve.bench.longform import LongformBench, LongformConfig, format_longform

    files = tuple(Path(f) for f in args.files)
    for f in files:
        if not f.is_file():
            raise InvalidInput(f"{f} does not exist")
    settings = engine_settings(args)
    config = LongformConfig(
        files=files,
        repeats=max(1, args.repeats),
        batch_sizes=tuple(int(b) for b in args.peer_batch_sizes.split(",") if b.strip()),
        beam_size=settings.asr.beam_size,
        language=args.language,
        word_timestamps=not args.no_words,
        model=args.model,
    )
    vox = Voxserve(settings)
    try:
        report = LongformBench(vox, config, log=lambda s: print(s, file=sys.stderr)).run()
    finally:
        vox.close()
    print(format_longform(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_agent(args: argparse.Namespace) -> int:
    """Run the voice agent benchmark and print its tables."""
    from voxserve.bench.agent import AgentBenchConfig, format_agent_report, run_agent_bench

    if args.rounds < 1:
        raise InvalidInput("--rounds must be at least 1")
    settings = engine_settings(args)
    if args.llm_url:
        settings = settings.model_copy(update={"agent": settings.agent.model_copy(update={"llm_url": args.llm_url})})
    config = AgentBenchConfig(rounds=args.rounds, knowledge_dir=args.knowledge, voice=args.voice)
    report = run_agent_bench(settings, config, log=lambda s: print(s, file=sys.stderr))
    print(format_agent_report(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_longform_process(args: argparse.Namespace) -> int:
    """Whole-process long-file comparison against faster-whisper's batched pipeline."""
    import json

    from voxserve.backends.registry import resolve_asr
    from voxserve.bench.process_longform import compare, format_report

    report = compare([Path(f) for f in args.files], str(resolve_asr("whisper-base")[1]),
                     tuple(int(b) for b in args.peer_batch_sizes.split(",")), args.repeats, args.words,
                     log=lambda line: print(line, file=sys.stderr))
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def cmd_make_long(args: argparse.Namespace) -> int:
    """Write a long recording and its reference."""
    from voxserve.bench.longfile import make_long_recording
    from voxserve.eval.corpus import default_corpus

    corpus = Path(args.corpus) if args.corpus else default_corpus()
    if corpus is None:
        raise InvalidInput("no corpus folder: pass --corpus DIR")
    out = make_long_recording(corpus, Path(args.out), args.minutes, args.seed, args.half)
    print(out)
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    """Run the server benchmark and print its table."""
    import tempfile

    from voxserve.bench.server import ServerBenchConfig, format_server, run_server_bench
    from voxserve.eval.corpus import default_corpus, find_items

    files = [Path(f) for f in args.files]
    if not files:
        corpus = default_corpus()
        if corpus is None:
            raise InvalidInput("no files given and no corpus folder found")
        files = [i.audio for i in find_items(corpus, ("asr",))]
    settings = engine_settings(args)
    with tempfile.TemporaryDirectory() as data_dir:
        run_settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"data_dir": data_dir, "api_keys": ()})}
        )
        config = ServerBenchConfig(
            files=tuple(files), clients=tuple(int(c) for c in args.clients.split(",")),
            requests_per_client=args.requests, beam_size=settings.asr.beam_size,
        )
        report = run_server_bench(run_settings, config, log=lambda s: print(s, file=sys.stderr))
    print(format_server(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_tts(args: argparse.Namespace) -> int:
    """Run the synthesis capacity benchmark and print its tables."""
    from voxserve.bench.tts import PARAGRAPH, BatchSizes, TtsBench, TtsBenchConfig, format_tts_report
    from voxserve.config import load_settings

    if args.text_stream:
        return _cmd_tts_text_stream(args)
    if args.rates:
        return _cmd_tts_goodput(args)
    if args.streams < 1:
        raise InvalidInput("--streams must be at least 1")
    settings = load_settings(args.config, tts={"max_streams": 4096})
    batches = BatchSizes()
    vox = Voxserve(settings, observer=batches)
    tts = vox.tts()
    config = TtsBenchConfig(
        max_streams=args.streams, text=args.text or PARAGRAPH, voice=args.voice, ramp_s=args.ramp_s,
        ttfb_budget_s=args.ttfb_budget_ms / 1000.0, refine=args.refine, client_buffer_s=args.client_buffer_ms / 1000.0,
        levels=tuple(int(n) for n in args.levels.split(",") if n.strip()) if args.levels else (),
    )
    try:
        report = TtsBench(tts, config, batches, log=lambda s: print(s, file=sys.stderr)).run()
    finally:
        vox.close()
    print(format_tts_report(report))
    if args.json:
        write_report(args.json, report)
    return 0


def _numbers(text: str, flag: str) -> tuple[float, ...]:
    """A comma-separated list of numbers given to ``flag``; InvalidInput names the flag when one is not."""
    try:
        return tuple(float(r) for r in text.split(",") if r.strip())
    except ValueError:
        raise InvalidInput(f"{flag} must be comma-separated numbers, not {text!r}") from None


def _cmd_tts_goodput(args: argparse.Namespace) -> int:
    """``bench tts --rates``: first audio and gap-free streams under Poisson arrivals, over a loopback server."""
    import tempfile

    from voxserve.bench.tts_goodput import GoodputConfig, format_goodput, run_goodput
    from voxserve.config import load_settings

    rates = _numbers(args.rates, "--rates")
    config = GoodputConfig(rates=rates, seconds=args.seconds, voice=args.voice, seed=args.seed,
                           client_buffer_s=args.client_buffer_ms / 1000.0, baseline=not args.no_baseline)
    config.validate()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(args.config, tts={"max_streams": 4096},
                                 server={"data_dir": data_dir, "api_keys": (), "max_concurrent_per_key": 4096})
        report = run_goodput(settings, config, log=lambda s: print(s, file=sys.stderr))
    print(format_goodput(report))
    if args.json:
        write_report(args.json, report)
    return 0


def _cmd_tts_text_stream(args: argparse.Namespace) -> int:
    """``bench tts --text-stream``: first audio with the reply's text streamed in, over a loopback server."""
    import tempfile

    from voxserve.agent.options import AgentOptions
    from voxserve.bench.tts_text_stream import TextStreamConfig, format_text_stream, run_text_stream
    from voxserve.config import load_settings

    rates = _numbers(args.token_rates, "--token-rates")
    wait_ms = args.wait_ms if args.wait_ms is not None else AgentOptions().first_segment_wait_s * 1000.0
    config = TextStreamConfig(replies=args.replies, token_rates=rates, llm=not args.no_llm, wait_ms=wait_ms,
                              voice=args.voice)
    config.validate()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(args.config, server={"data_dir": data_dir, "api_keys": ()})
        report = run_text_stream(settings, config, log=lambda s: print(s, file=sys.stderr))
    print(format_text_stream(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    """Run the live benchmark and print its table."""
    import tempfile

    from voxserve.audio import decode_audio
    from voxserve.bench.live import format_live, interleave, run_live_bench
    from voxserve.bench.longfile import reading_runs
    from voxserve.eval.corpus import default_corpus, find_items

    root = Path(args.corpus) if args.corpus else (default_corpus() or Path(__file__).resolve().parents[2] / "tests" / "data")
    items = [i for i in find_items(root, ("asr",)) if i.language == "en"]
    if args.half:
        from voxserve.eval.split import names

        items = [i for i in items if i.name in names(args.half, "asr")]
    if not items:
        raise InvalidInput(f"no English clips with references under {root}")
    clips = interleave([(decode_audio(i.audio), i.reference.read_text(encoding="utf-8").strip()) for i in items],
                       reading_runs(root, args.half))
    settings = engine_settings(args)
    with tempfile.TemporaryDirectory() as data_dir:
        run_settings = settings.model_copy(update={
            "server": settings.server.model_copy(update={"data_dir": data_dir, "api_keys": ()}),
            "live": settings.live.model_copy(update={"max_streams": max(settings.live.max_streams, 256)}),
        })
        streams = [int(n) for n in args.streams.split(",") if n.strip()]
        report = run_live_bench(run_settings, clips, streams, args.seconds, args.whisperlive_python,
                                log=lambda s: print(s, file=sys.stderr))
    print(format_live(report))
    if args.json:
        write_report(args.json, report)
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    """Run the soak test; exit status 1 when anything was lost, mixed or out of order, or did not come back."""
    from voxserve.bench.soak import SoakConfig, default_clips, format_soak, run_soak

    config = SoakConfig(streams=args.streams, seconds=args.seconds, slow=args.slow, vanish=args.vanish,
                        uploads=args.uploads, model=args.model, url=args.url, pid=args.pid)
    report = run_soak(config, default_clips(), log=lambda s: print(s, file=sys.stderr))
    print(format_soak(report))
    if args.json:
        write_report(args.json, report)
    return 0 if report["ok"] else 1
