"""The tune/check split of the development corpus.

Constants (guard thresholds, VAD settings, chunk sizes, diarization parameters) may be tuned only on the
tune half; every reported figure is measured on the check half. The rule is fixed and written down here
and in docs/benchmarks.md: within each subset (``asr``, ``diar``, ``lang``) the file names are sorted and
alternate tune, check, tune, ... The long-form reading (32 LJSpeech sentences) is split in time: its
first 16 sentences (0-111.1 s) are tune audio, the last 16 check audio. Files built from corpus clips
(stress sets, long test files) use clips of one half only and belong to that half.
"""

from __future__ import annotations

from typing import Literal

Half = Literal["tune", "check"]

TUNE: dict[str, tuple[str, ...]] = {
    "asr": (
        "ds_ldc93s1", "fw_stereo_right_ls260", "lh_lj_LJ002-0020", "mfa_cold_corpus", "mfa_cv_en_22058264",
        "mfa_her", "mfa_ls_61-70968-0000", "mfa_surround", "mfa_uhum", "mfa_youknow", "sb_lj_LJ050-0131",
    ),
    "diar": ("ami_dev00", "ami_trn00", "ami_trn02", "ami_trn04", "ami_trn07"),
    "lang": ("de__aeneas_librivox", "es__aeneas_librivox", "fr__pv_test_fr", "ja__pv_test_ja",
             "sv__mfa_nst_u0016004"),
}
CHECK: dict[str, tuple[str, ...]] = {
    "asr": (
        "fw_jfk", "lc_ls_1089-134686-0001", "mfa_acoustic_corpus", "mfa_crossword", "mfa_falsetto2",
        "mfa_longstop", "mfa_reallylong", "mfa_theother", "mfa_whisper2", "sb_example1", "ub_english_123",
    ),
    "diar": ("ami_dev01", "ami_trn01", "ami_trn03", "ami_trn05", "ami_trn08"),
    "lang": ("de__pv_test_de", "es__pv_test_es", "ja__mfa_cv_24511055", "pt__pv_test_pt", "zh__ub_chinese"),
}
LONG_FORM = "lj_LJ001-0001-0032_concat"
LONG_FORM_CHECK_FROM_S = 111.1
"""The long-form reading's check half starts here (sentence LJ001-0017); before it is tune audio."""


def names(half: Half, subset: str) -> tuple[str, ...]:
    """The file names of one half of one subset."""
    return (TUNE if half == "tune" else CHECK)[subset]
