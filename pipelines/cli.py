"""The `__main__` of every pipeline: absl's app.run, a quiet log, one-line user errors.

A user's mistake (a missing or wrong --model_dir, --saved_model, --checkpoint or input
file, a run directory from another vocabulary, a flag combination that cannot work, a
corrupt checkpoint) ends the process with ONE line on stderr, `NAME: error: MESSAGE`,
and exit status 2. Any other exception is a bug and keeps its traceback (exit status 1).
With --verbosity=0 a user error's traceback is logged too.

The library names its own parameters in its messages, in backticks (`beam_size`,
`nbest=3`); the line printed here names the flags instead (--beam_size, --nbest=3), so a
command-line user reads the command line's vocabulary (`flag_names`).
"""

import os
import re
import sys

from absl import app, flags, logging

FLAGS = flags.FLAGS
# As argparse; Python exits 1 after a traceback, so scripts can tell the two apart.
USER_ERROR_EXIT_CODE = 2


def program_name():
    """The pipeline's name as the user typed it: `translate` for pipelines/translate.py."""
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def user_errors():
    """The exceptions that report a user's mistake: usage errors, and those the library
    raises for unusable files, runs and corpora (imported only once an exception
    propagates, so that a pipeline loads no module it does not use)."""
    from convs2s_tf.data.errors import (
        CorruptShardError,
        DatasetUnavailableError,
        InvalidUtf8Error,
        LineCountMismatchError,
        SentencePieceModelError,
    )
    from convs2s_tf.data.text_files import LineTooLongError
    from convs2s_tf.distillation import DistillationError
    from convs2s_tf.export.saved_model import ModelNameError
    from convs2s_tf.interop.fairseq_dictionary import DictionaryError
    from convs2s_tf.interop.fairseq_fconv import FairseqImportError
    from convs2s_tf.interop.vocabulary_tokenizer import VocabularyError
    from convs2s_tf.runs import CheckpointError
    from convs2s_tf.serving import PortInUseError
    from convs2s_tf.shortlist.shortlist import ShortlistError
    from convs2s_tf.training import TrainingDivergedError

    return (
        app.UsageError,
        flags.Error,  # flags.ValidationError among them
        # CorpusFileNotFoundError is a FileNotFoundError.
        FileNotFoundError,
        NotADirectoryError,
        IsADirectoryError,
        PermissionError,
        CheckpointError,
        CorruptShardError,
        PortInUseError,
        DatasetUnavailableError,
        InvalidUtf8Error,
        LineCountMismatchError,
        LineTooLongError,
        SentencePieceModelError,
        DistillationError,
        DictionaryError,
        FairseqImportError,
        VocabularyError,
        ShortlistError,
        TrainingDivergedError,
        ModelNameError,
    )


# Library parameters whose flag has another name: {parameter: flag}. Every other
# parameter that a message names is the flag of the same name, where one is defined.
FLAG_ALIASES = {
    # Translator.check_request(attention=True): translate's attention images.
    "attention": "attention_dir",
    # build_shortlist's training text.
    "source_file": "shortlist_source",
    "target_file": "shortlist_target",
}

# A parameter as the library's messages name it: `name` or `name=value`.
_BACKTICKED_PARAMETER = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:=([^`]*))?`")


def flag_names(message, flag_values=None):
    """`message` with each parameter named in backticks that is a flag of `flag_values`
    (default: the process' flags), under its own name or its `FLAG_ALIASES` one, written
    as the flag: `nbest=3` -> --nbest=3 (a quoted value unquoted: `invalid_utf8='replace'`
    -> --invalid_utf8=replace). Other backticked text stays as it is.
    """
    flag_values = FLAGS if flag_values is None else flag_values

    def replace(match):
        name, value = match.groups()
        flag = FLAG_ALIASES.get(name, name)
        if flag not in flag_values:
            return match.group(0)
        if value is None:
            return f"--{flag}"
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        return f"--{flag}={value}"

    return _BACKTICKED_PARAMETER.sub(replace, message)


def one_line(error):
    """`error`'s message on one line (multi-line messages joined with spaces), naming the
    flags where the library names its parameters (`flag_names`)."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    return flag_names(message) if message else type(error).__name__


def fail(error):
    """Prints `NAME: error: MESSAGE` for `error` (an exception or a message) on stderr
    and exits with status 2."""
    if isinstance(error, BaseException):
        # The traceback stays available to whoever asks for INFO logs.
        logging.info("%s:", type(error).__name__, exc_info=error)
    print(f"{program_name()}: error: {one_line(error)}", file=sys.stderr, flush=True)
    sys.exit(USER_ERROR_EXIT_CODE)


def _parse_flags(argv):
    # absl's own parser prints "FATAL Flags parsing error" and a hint on two lines.
    try:
        return FLAGS(argv)
    except flags.Error as error:
        fail(f"{one_line(error)} (--help lists the flags)")


def run(main):
    """Runs `main(argv)` as the process' entry point, as `absl.app.run` does.

    Logging defaults to WARNING rather than absl's INFO (--verbosity=0 restores INFO);
    user errors become one line on stderr (see the module docstring).
    """

    def quiet_main(argv):
        if not FLAGS["verbosity"].present:
            # app.run raised an unset --verbosity to INFO; the pipelines' default is WARNING.
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except user_errors() as error:
            fail(error)

    app.run(quiet_main, flags_parser=_parse_flags)
