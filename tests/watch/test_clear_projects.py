"""``loop-killer clear`` when one session id sits in two projects (issue 21): it never
picks one silently; ``--project`` chooses, and the request names that transcript."""

from __future__ import annotations

from loop_killer import cli
from loop_killer.state.inbox import peek_request
from transcripts import Lines, append

SESSION = "a26ba613-efc5-4fa5-919a-77fca5250a20"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _two_projects(env) -> tuple[Lines, Lines]:
    web, api = Lines(session_id=SESSION, cwd="/home/dev/web"), Lines(session_id=SESSION,
                                                                    cwd="/home/dev/api")
    for s in (web, api):
        append(s.path_in(env.root), s.goal_loop(2))
    return web, api


def test_an_id_in_two_projects_is_ambiguous_and_says_where(env, capsys):
    web, api = _two_projects(env)
    code, _, err = run(capsys, "clear", SESSION[:8])
    assert code == 1
    assert "2 projects" in err and "--project" in err
    assert web.project in err and api.project in err
    assert peek_request(env.state, SESSION) is None


def test_project_chooses_the_transcript_the_request_names(env, capsys):
    web, api = _two_projects(env)
    code, out, err = run(capsys, "clear", SESSION, "--project", "api")
    assert code == 0, err
    request = peek_request(env.state, SESSION)
    assert request is not None and request.transcript_path == str(api.path_in(env.root))
    code, _, err = run(capsys, "clear", SESSION, "--project", "nowhere")
    assert code == 1 and "no session" in err
