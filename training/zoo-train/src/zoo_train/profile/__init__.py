"""Profiles of training: capture a trace of chosen steps, and read where their time went."""

from ..settings import parse_window as parse_window
from ._capture import PROFILE_DIR as PROFILE_DIR
from ._capture import ProfileWindow as ProfileWindow
from ._capture import host_annotation as host_annotation
from ._capture import step_annotation as step_annotation
from ._compare import compare as compare
from ._hlo import HloProgram as HloProgram
from ._hlo import parse_hlo as parse_hlo
from ._render import render_comparison as render_comparison
from ._render import render_summary as render_summary
from ._summary import Summary as Summary
from ._summary import summarize as summarize
