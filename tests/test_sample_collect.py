"""The sample collect host: corerun, the shim collector, pmi.dll and the sample apps (real processes)."""
from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from sample_support import clean_env, csv_rows, generator, run

from sample import assembly, mchfile
from sample.context import decode_context
from sample.shim import shim_file_name

pytestmark = pytest.mark.skipif(os.name == "nt", reason="the sample toolchain is generated for Linux and macOS")

COLLECT_ENV = {"DOTNET_EnableExtraSuperPmiQueries": "1", "DOTNET_TieredCompilation": "0"}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return generator.make_toolchain(tmp_path_factory.mktemp("collect_chain"), contexts=1,
                                    targets=["linux-x64"], collections=["libraries.pmi"])


def shim_env(chain, log_dir: Optional[Path], extra: Optional[Dict[str, str]] = None,
             shim_path: Optional[Path] = None) -> Dict[str, str]:
    """The environment `collect` gives the host: the shim as the JIT, the real JIT behind it."""
    env = {"DOTNET_JitName": chain.shim.name, "DOTNET_JitPath": str(chain.shim),
           "SuperPMIShimPath": str(shim_path or chain.native_jit)}
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        env["SuperPMIShimLogPath"] = str(log_dir)
    env.update(extra if extra is not None else COLLECT_ENV)
    return clean_env(env)


def corerun(chain, args: List[object], env: Dict[str, str], cwd: Path):
    return run([chain.corerun, *args], cwd, env)


def mc_files(directory: Path) -> List[Path]:
    return sorted(directory.glob("*.mc"))


def contexts_in(path: Path):
    data = path.read_bytes()
    return [decode_context(mchfile.record_payload(data, ref)) for ref in mchfile.scan_records(data)]


def mcs(chain, *args):
    return run([chain.mcs, *args], chain.core_root)


def merge(chain, log_dir: Path, out: Path):
    return mcs(chain, "-merge", out, str(log_dir / "*.mc"), "-recursive", "-dedup", "-thin")


def replay(chain, mch: Path, tmp_path: Path, *extra: object):
    fail = tmp_path / ("%s.fail.mcl" % mch.stem)
    details = tmp_path / ("%s.details.csv" % mch.stem)
    result = run([chain.superpmi, "-v", "ewmi", "-f", fail, "-details", details, *extra, chain.native_jit, mch],
                 chain.core_root)
    rows = csv_rows(details) if details.exists() else []
    table = [dict(zip(rows[0], row)) for row in rows[1:]] if rows else []
    return result, fail, table


# ---------------------------------------------------------------- layout

def test_collect_host_is_installed_under_real_names(chain):
    assert chain.shim == chain.core_root / shim_file_name(chain.host_os)
    assert chain.shim.name in ("libsuperpmi-shim-collector.so", "libsuperpmi-shim-collector.dylib")
    assert shim_file_name("windows") == "superpmi-shim-collector.dll"
    assert chain.corerun.name == "corerun" and os.access(chain.corerun, os.X_OK)
    assert chain.pmi_dll.is_file() and chain.pmi_dll.parent != chain.core_root
    assert sorted(p.name for p in chain.apps_dir.iterdir()) == [
        "crash.dll", "failing.dll", "hello.dll", "library.dll", "native.dll"]
    assert (chain.deps_dir / "deps.dll").is_file()
    assert (chain.core_root / "lib" / "sample" / "corerun_main.py").is_file()


# ---------------------------------------------------------------- running apps with the shim

def test_each_run_writes_a_uniquely_named_mc_file_of_mch_records(chain, tmp_path):
    log_dir = tmp_path / "mc"
    first = corerun(chain, [chain.app("hello"), "a", "b"], shim_env(chain, log_dir), tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.decode().splitlines() == ["Hello from the sample app!", "args: a b"]
    assert corerun(chain, [chain.app("hello")], shim_env(chain, log_dir), tmp_path).returncode == 0
    files = mc_files(log_dir)
    assert len(files) == 2 and files[0].name != files[1].name
    for path in files:
        contexts = contexts_in(path)  # framed exactly as .mch records
        assert [c.tier for c in contexts] == ["FullOpts"] * 5
        assert contexts[0].name == "Hello.Program:Main(System.String[]):int"
        assert (contexts[0].target_os, contexts[0].target_arch) == (chain.host_os, chain.host_arch)


def test_mc_files_merge_replay_strip_and_index(chain, tmp_path):
    log_dir = tmp_path / "mc"
    for app in ("hello", "hello", "failing"):
        result = corerun(chain, [chain.app(app)], shim_env(chain, log_dir), tmp_path)
        assert result.returncode == 0, result.stderr
    assert len(mc_files(log_dir)) == 3
    base = tmp_path / "base.mch"
    merged = merge(chain, log_dir, base)
    assert merged.returncode == 0, merged.stderr
    assert len(contexts_in(base)) == 5 + 4  # the second hello run is all duplicates

    result, fail, rows = replay(chain, base, tmp_path)
    assert result.returncode == 1, result.stdout
    failing = [row["Context"] for row in rows if row["Result"] != "Success"]
    assert len(failing) == 1 and len(rows) == 9
    assert mchfile.parse_mcl_text(fail.read_text()) == [int(failing[0])]
    names = {n: c.name for n, c in enumerate(contexts_in(base), start=1)}
    assert names[int(failing[0])] == "Failing.Broken:Replay(ubyte,long):int"

    final = tmp_path / "final.mch"
    stripped = mcs(chain, "-strip", fail, base, final)
    assert stripped.returncode == 0 and b"Loaded 9, Saved 8" in stripped.stdout
    assert "Failing.Broken:Replay(ubyte,long):int" not in [c.name for c in contexts_in(final)]
    toc = mcs(chain, "-toc", final)
    assert toc.returncode == 0 and b"Loaded 8, added 8 to Table of Contents" in toc.stdout
    assert Path(str(final) + ".mct").is_file()
    clean, fail2, rows2 = replay(chain, final, tmp_path)
    assert clean.returncode == 0 and fail2.read_bytes() == b"" and len(rows2) == 8


def tiers_recorded(chain, tmp_path: Path, name: str, app: str, extra: Dict[str, str]) -> Counter:
    log_dir = tmp_path / name
    result = corerun(chain, [chain.app(app)], shim_env(chain, log_dir, dict(extra)), tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / (name + ".mch")
    assert merge(chain, log_dir, out).returncode == 0
    replayed, _, rows = replay(chain, out, tmp_path)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    return Counter(row["Tier name"] for row in rows)


def test_tiering_and_ready_to_run_settings_change_what_is_recorded(chain, tmp_path):
    extra = {"DOTNET_EnableExtraSuperPmiQueries": "1"}
    no_tiering = tiers_recorded(chain, tmp_path, "tc0", "hello", dict(extra, DOTNET_TieredCompilation="0"))
    tiering = tiers_recorded(chain, tmp_path, "tc1", "hello", dict(extra, DOTNET_TieredCompilation="1"))
    pgo = tiers_recorded(chain, tmp_path, "pgo", "hello",
                         dict(extra, DOTNET_TieredCompilation="1", DOTNET_TieredPGO="1"))
    no_r2r = tiers_recorded(chain, tmp_path, "r2r0", "hello",
                            dict(extra, DOTNET_TieredCompilation="0", DOTNET_ReadyToRun="0"))
    default = tiers_recorded(chain, tmp_path, "default", "hello", extra)
    assert no_tiering == Counter({"FullOpts": 5})
    assert tiering == Counter({"Tier0": 5, "Tier1": 3, "Tier1-OSR": 1})
    assert pgo == Counter({"Tier0": 3, "Instrumented Tier0": 3, "Instrumented Tier1": 1, "Tier1": 3,
                           "Tier1-OSR": 1})
    assert no_r2r == Counter({"FullOpts": 7})
    assert default == tiering  # the runtime tiers unless told not to
    hello = assembly.sample_assemblies()["apps/hello.dll"]
    for counts, env in ((tiering, {"DOTNET_TieredCompilation": "1"}),
                        (pgo, {"DOTNET_TieredCompilation": "1", "DOTNET_TieredPGO": "1"})):
        planned = Counter(c.tier for c in assembly.plan_run(hello, assembly.runtime_settings(env)))
        assert counts == planned


def test_jit_opt_repeat_is_recorded_and_shows_in_replay_metrics(chain, tmp_path):
    def collect(name: str, extra: Dict[str, str]):
        log_dir = tmp_path / name
        assert corerun(chain, [chain.app("hello")], shim_env(chain, log_dir, dict(COLLECT_ENV, **extra)),
                       tmp_path).returncode == 0
        out = tmp_path / (name + ".mch")
        assert merge(chain, log_dir, out).returncode == 0
        return out

    plain = collect("plain", {})
    repeated = collect("repeat", {"DOTNET_JitOptRepeat": "*"})
    assert all(c.stored_config == {"JitOptRepeat": "*"} for c in contexts_in(repeated))
    assert all(c.stored_config == {} for c in contexts_in(plain))
    _, _, plain_rows = replay(chain, plain, tmp_path)
    _, _, repeat_rows = replay(chain, repeated, tmp_path)
    assert [r["Method full name"] for r in plain_rows] == [r["Method full name"] for r in repeat_rows]
    assert all(int(r["BytesAllocated"]) > int(p["BytesAllocated"]) for p, r in zip(plain_rows, repeat_rows))
    assert [r["ActualCodeBytes"] for r in plain_rows] == [r["ActualCodeBytes"] for r in repeat_rows]
    ignored = tmp_path / "ignored"
    ignored.mkdir()
    _, _, ignored_rows = replay(chain, repeated, ignored, "-ignoreStoredConfig")
    assert [r["BytesAllocated"] for r in ignored_rows] == [r["BytesAllocated"] for r in plain_rows]


def test_without_extra_superpmi_queries_a_context_misses_data(chain, tmp_path):
    log_dir = tmp_path / "mc"
    env = shim_env(chain, log_dir, {"DOTNET_TieredCompilation": "0"})
    assert corerun(chain, [chain.app("hello")], env, tmp_path).returncode == 0
    result, fail, rows = replay(chain, mc_files(log_dir)[0], tmp_path)
    assert result.returncode == 3
    assert b"MISSING: Method context 2 failed to replay" in result.stdout
    assert [r["Result"] for r in rows].count("Miss") == 1
    assert mchfile.parse_mcl_text(fail.read_text()) == [2]


# ---------------------------------------------------------------- PMI

def test_pmi_drives_every_method_and_honours_pmipath(chain, tmp_path):
    def drive(name: str, target: Path, extra: Dict[str, str]):
        log_dir = tmp_path / name
        env = shim_env(chain, log_dir, dict(COLLECT_ENV, **extra))
        result = corerun(chain, [chain.pmi_dll, "DRIVEALL", target], env, tmp_path)
        names = [c.name for path in mc_files(log_dir) for c in contexts_in(path)]
        return result, names

    result, names = drive("nopath", chain.app("library"), {})
    assert result.returncode == 0
    assert b"could not resolve reference 'deps'" in result.stdout
    assert [n.split(":")[0] for n in names] == ["PMI.Program", "PMI.PrepareAll", "PMI.PrepareAll",
                                                "Sample.Library.Shapes", "Sample.Library.Shapes",
                                                "Sample.Library.Sorting"]
    pmi_path = os.pathsep.join([str(tmp_path / "nowhere"), str(chain.deps_dir)])
    result, names = drive("pmipath", chain.app("library"), {"PMIPATH": pmi_path})
    assert result.returncode == 0 and b"#methods: 6, #jitted: 5" in result.stdout
    assert len(names) == 3 + 5
    result, names = drive("r2r0", chain.app("library"), {"PMIPATH": str(chain.deps_dir), "DOTNET_ReadyToRun": "0"})
    assert len(names) == 3 + 6 and "Sample.Library.Sorting:Swap(byref,byref):void" in names
    result, names = drive("unused", chain.app("hello"), {})
    assert "Hello.Program:Unused(int):int" in names  # never runs, but PMI compiles it

    result, names = drive("native", chain.apps_dir / "native.dll", {})
    assert result.returncode != 0 and b"not a managed assembly" in result.stdout
    assert len(names) == 3  # only PMI's own code
    result = corerun(chain, [chain.pmi_dll, "PREPALL", chain.app("hello")], shim_env(chain, tmp_path / "u"), tmp_path)
    assert result.returncode != 0 and result.stdout.startswith(b"Usage: pmi DRIVEALL")


def test_pmi_runs_of_several_assemblies_dedup_pmi_code(chain, tmp_path):
    log_dir = tmp_path / "mc"
    for target in (chain.app("hello"), chain.app("failing")):
        assert corerun(chain, [chain.pmi_dll, "DRIVEALL", target], shim_env(chain, log_dir), tmp_path).returncode == 0
    assert len(mc_files(log_dir)) == 2
    out = tmp_path / "pmi.mch"
    assert merge(chain, log_dir, out).returncode == 0
    names = [c.name for c in contexts_in(out)]
    assert len(names) == 3 + 6 + 4 and len(set(names)) == len(names)


# ---------------------------------------------------------------- failures

def test_crashing_app_leaves_a_truncated_last_record(chain, tmp_path):
    log_dir = tmp_path / "mc"
    result = corerun(chain, [chain.app("crash")], shim_env(chain, log_dir), tmp_path)
    assert result.returncode == -signal.SIGSEGV
    assert result.stdout == b"Starting...\n"
    (mc,) = mc_files(log_dir)
    data = mc.read_bytes()
    with pytest.raises(mchfile.FramingError) as raised:
        list(mchfile.scan_records(data))
    assert raised.value.number == 4
    refs, truncated_at = mchfile.scan_complete_records(data)
    assert len(refs) == 3 and truncated_at == refs[-1].end < len(data)

    direct = run([chain.superpmi, chain.native_jit, mc], chain.core_root)
    assert direct.returncode == 255 and b"ERROR: Method 4 is of low integrity." in direct.stderr
    out = tmp_path / "crash.mch"
    merged = merge(chain, log_dir, out)
    assert merged.returncode == 0 and b"truncated method context" in merged.stderr
    assert [c.name.split("(")[0] for c in contexts_in(out)] == [
        "Crash.Program:Main", "Crash.Program:Setup", "Crash.Program:Load"]
    replayed, _, _ = replay(chain, out, tmp_path)
    assert replayed.returncode == 0

    pmi_dir = tmp_path / "pmi"
    under_pmi = corerun(chain, [chain.pmi_dll, "DRIVEALL", chain.app("crash")], shim_env(chain, pmi_dir), tmp_path)
    assert under_pmi.returncode == -signal.SIGSEGV
    refs, truncated_at = mchfile.scan_complete_records(mc_files(pmi_dir)[0].read_bytes())
    assert len(refs) == 6 and truncated_at is not None


def test_other_framing_damage_still_fails_merge(chain, tmp_path):
    log_dir = tmp_path / "mc"
    assert corerun(chain, [chain.app("hello")], shim_env(chain, log_dir), tmp_path).returncode == 0
    (mc,) = mc_files(log_dir)
    mc.write_bytes(mc.read_bytes() + b"XX not a record")
    result = merge(chain, log_dir, tmp_path / "bad.mch")
    assert result.returncode == 255 and b"low integrity" in result.stderr
    assert not (tmp_path / "bad.mch").exists()


def test_shim_without_real_jit_path_fails_to_load(chain, tmp_path):
    log_dir = tmp_path / "mc"
    env = shim_env(chain, log_dir)
    del env["SuperPMIShimPath"]
    result = corerun(chain, [chain.app("hello")], env, tmp_path)
    assert result.returncode == -signal.SIGABRT
    assert b"SuperPMIShimPath" in result.stderr and b"Failed to load JIT compiler." in result.stderr
    assert result.stdout == b"" and mc_files(log_dir) == []

    bad = corerun(chain, [chain.app("hello")], shim_env(chain, log_dir, shim_path=chain.corerun), tmp_path)
    assert bad.returncode == -signal.SIGABRT and b"LoadLibrary failed" in bad.stderr


def test_jit_selection_and_plain_runs(chain, tmp_path):
    log_dir = tmp_path / "mc"
    log_dir.mkdir()
    plain = corerun(chain, [chain.app("hello")], clean_env({"SuperPMIShimLogPath": str(log_dir)}), tmp_path)
    assert plain.returncode == 0 and plain.stdout.startswith(b"Hello") and mc_files(log_dir) == []
    by_name = shim_env(chain, log_dir)
    del by_name["DOTNET_JitPath"]
    assert corerun(chain, [chain.app("hello")], by_name, tmp_path).returncode == 0
    assert len(mc_files(log_dir)) == 1
    path_wins = shim_env(chain, log_dir)
    path_wins["DOTNET_JitName"] = "libnothere.so"
    assert corerun(chain, [chain.app("hello")], path_wins, tmp_path).returncode == 0
    assert len(mc_files(log_dir)) == 2
    missing = clean_env({"DOTNET_JitName": "libnothere.so"})
    assert corerun(chain, [chain.app("hello")], missing, tmp_path).returncode == -signal.SIGABRT

    no_log = shim_env(chain, None)
    quiet = corerun(chain, [chain.app("hello")], no_log, tmp_path)
    assert quiet.returncode == 0 and b"SuperPMIShimLogPath" in quiet.stderr


def test_corerun_bad_input_is_one_line(chain, tmp_path):
    env = shim_env(chain, tmp_path / "mc")
    cases = [([], b"Usage: corerun"), ([tmp_path / "nothere.dll"], b"Could not find the assembly"),
             ([chain.app("library")], b"Main method not found"),
             ([chain.apps_dir / "native.dll"], b"is not a managed assembly")]
    for args, text in cases:
        result = corerun(chain, args, env, tmp_path)
        assert result.returncode == 255, args
        assert text in result.stderr and b"Traceback" not in result.stderr
        if args:
            assert len(result.stderr.splitlines()) == 1
    assert mc_files(tmp_path / "mc") == []


# ---------------------------------------------------------------- the NativeAOT compiler (ilc)

def ilc_rsp(tmp_path: Path, lines: List[str]) -> Path:
    rsp = tmp_path / "t.rsp"
    rsp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rsp


def ilc_lines(chain, test: str, out: Path, jit: Optional[Path] = None) -> List[str]:
    folder = chain.nativeaot_dir / test
    return [str(folder / test / (test + ".dll")), f"-o:{out}", f"-r:{chain.core_root / 'aotsdk' / 'System.*.dll'}",
            f"--descriptor:{folder / 'ILLink.Descriptors.xml'}", "--targetos:linux", "-O",
            f"--jitpath:{jit or chain.shim}", "--codegenopt:EnableExtraSuperPmiQueries=1",
            "--codegenopt:TieredCompilation=0"]


def test_ilc_compiles_every_method_once_through_the_shim(chain, tmp_path):
    log_dir = tmp_path / "mc"
    log_dir.mkdir()
    env = clean_env({"SuperPMIShimPath": str(chain.native_jit), "SuperPMIShimLogPath": str(log_dir)})
    out = tmp_path / "hello.a"
    result = run([chain.ilc, f"@{ilc_rsp(tmp_path, ilc_lines(chain, 'Hello', out))}"], tmp_path, env)
    assert result.returncode == 0, result.stderr.decode()
    assert out.is_file()
    [mc] = mc_files(log_dir)
    recorded = contexts_in(mc)
    hello = assembly.sample_assemblies()["apps/hello.dll"]
    assert [c.name for c in recorded] == [m.name for m in hello.methods]
    assert {c.tier for c in recorded} == {"FullOpts"}


@pytest.mark.parametrize("change, message", [
    (lambda lines: lines[1:], "error: No input files specified"),
    (lambda lines: [line for line in lines if not line.startswith("-o:")], "error: Output filename must be specified"),
    (lambda lines: [line for line in lines if not line.startswith("-r:")],
     "error: System.Private.CoreLib.dll not found among the references"),
    (lambda lines: [line.replace("ILLink", "Missing") for line in lines], "--descriptor file '"),
    (lambda lines: ["/__w/1/s/artifacts/tests/Hello/Hello/Hello.dll", *lines[1:]], "Input file '/__w/1/s"),
    (lambda lines: [*lines, "--codegenopt:JitNoCSE"], "--codegenopt 'JitNoCSE' must look like <name>=<value>"),
])
def test_ilc_is_strict_about_its_inputs(chain, tmp_path, change, message):
    env = clean_env({"SuperPMIShimPath": str(chain.native_jit), "SuperPMIShimLogPath": str(tmp_path)})
    lines = change(ilc_lines(chain, "Hello", tmp_path / "o.a"))
    result = run([chain.ilc, f"@{ilc_rsp(tmp_path, lines)}"], tmp_path, env)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and not mc_files(tmp_path)


def test_a_test_rsp_as_the_build_wrote_it_does_not_compile_here(chain, tmp_path):
    rsp = chain.nativeaot_dir / "Hello" / "Hello" / "native" / "Hello.ilc.rsp"
    result = run([chain.ilc, f"@{rsp}"], tmp_path, clean_env({}))
    assert result.returncode == 1 and "Input file '/__w/1/s/artifacts/tests/Hello/Hello/Hello.dll' not found" \
        in result.stderr.decode()
