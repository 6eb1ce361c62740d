"""The names of the messages between the judge and its processes, on both sides of the trust line.

One JSON object a line. The judge writes commands to a process's stdin; a process answers with
events on its protocol pipe (candidate processes) or stdout (the reference worker). This module
imports nothing: candidate processes load it before any submission, and the judge reads the same
names, so a renamed message cannot drift between the two sides.

Candidate processes (kernel_env/candidate/runner.py), in the order of an evaluation:

    build process   <- {"cmd": BUILD, "env": {...}}          -> BUILT | ERROR (phase "build"); before
                                                                 that, a COMPILE event per load_inline call
                                                                 not built yet, each answered by
                                                                 {"cmd": COMPILED, "ok": ..., "message"}
    compile process <- {"cmd": COMPILE, "env", "call",        -> COMPILED | ERROR (phase "build"); before
                        "folder"} (again, call after call)       that, a NINJA event per ninja run its build
                                                                 needs ({"dir", "jobs"}), each answered by
                                                                 {"cmd": NINJA, "rc", "output"}: the judge
                                                                 runs it in a sandbox of its own
    ninja step      (candidate/ninja_step.py: ninja in a build folder)  -> NINJA_RAN ({"rc", "cpu_s"})
    run process     -> IMPORTED   <- {"cmd": WARM}            -> WARM_STEP, and again on each WARM,
                                                                 until WARMED (each step's GPU work
                                                                 waits for the judge's word)
                    <- the plan (seeds, task, timing rule)    -> READY
                    <- {"cmd": GO, "slots", "dists",          -> STEP "construct", STEP "trial" (i = 0,
                        "trial_rows", "timing_sets",             1, ...), OUTPUTS (a batch of trials'
                        "token", "timing"}                       outputs, "more": true while trials remain)
                    <- {"cmd": NEXT}                          -> the next batch: STEP "trial"..., OUTPUTS
                    <- {"cmd": TIME, "timing"}                -> TIMED, STEP "profile", DONE | ERROR

STEP ({"event": STEP, "step": ..., "i": ...}) says the runner starts that step: the judge gives each
step a deadline of its own on its own clock (judge/deadlines.py), in this fixed order; GO starts the
import and TIME the timing. Every event after GO carries the token GO brought. ERROR has a `phase` and a `kind` (BUILD_ERROR,
NO_MODEL_NEW, REJECTED, RUNTIME_ERROR). The judge's own reading of a process adds EOF (it ended),
TIMEOUT (no line in time) and GARBAGE (a line that is not a JSON object).

The reference worker (kernel_env/judge/reference_worker.py) takes {"mode": ...} requests: WARM_UP,
PROFILE, PREPARE (hand out output slots), CHECK (the trials, before the timing), COMPARE (the
rechecks of timed calls), RELEASE (let go of the slots); it answers {"ok": true, ...} or
{"ok": false, "error": ...}.
"""

# commands to a candidate process ("cmd")
BUILD = "build"
COMPILE = "compile"    # to a compile process; also the build process's request (an event)
COMPILED = "compiled"  # the judge's answer to that request; also the compile process's event
NINJA = "ninja"        # a compile process's request to run ninja in a build folder; the judge's answer
WARM = "warm"
GO = "go"
NEXT = "next"  # the trials checked so far passed: the next batch of trials, in the same slots
TIME = "time"

# events from a candidate process ("event")
BUILT = "built"
IMPORTED = "imported"
WARM_STEP = "warm_step"  # one step of the warm-up done; the next waits for WARM
WARMED = "warmed"
READY = "ready"
OUTPUTS = "outputs"
TIMED = "timed"
STEP = "step"
DONE = "done"
NINJA_RAN = "ninja_ran"  # a ninja step's last line (candidate/ninja_step.py spells it out: it imports nothing)

# the steps a run process announces (STEP's "step"), in their order
CONSTRUCT = "construct"
TRIAL = "trial"
PROFILE_STEP = "profile"
ERROR = "error"

# kinds of ERROR
BUILD_ERROR = "build_error"
NO_MODEL_NEW = "no_model_new"
REJECTED = "rejected"
RUNTIME_ERROR = "runtime_error"

# what the judge's reader says of a process that sent no proper line
EOF = "eof"
TIMEOUT = "timeout"
GARBAGE = "garbage"
READER_EVENTS = (TIMEOUT, EOF, GARBAGE)

# requests to the reference worker ("mode")
WARM_UP = "warm"
PROFILE = "profile"
PREPARE = "prepare"
CHECK = "check"
COMPARE = "compare"
RELEASE = "release"

# where each Triton version defines triton_key() (and calls it from): the judge asks it there once and
# run processes take the answer there (judge/environ.triton_key, candidate/triton_warm.use_key)
TRITON_KEY_MODULES = ("triton.runtime.cache", "triton.compiler.compiler")
