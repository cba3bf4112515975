// loop-killer's mod: the hands, never the brain.
//
// Claude Code (2.1.287 and later) loads this ES module in-process because
// hooks/hooks.json names it under "modules"; that path is relative to
// hooks.json, so this file must sit in hooks/. Builds that load no mod (2.1.250
// keeps them behind a rollout flag that is off offline, and knows no
// `classic.Stop`) still run the Python command Stop hook (hooks/launch.py),
// which is the brain:
// it decides whether a Stop-hook re-prompt loop must end and writes every word
// the person sees. This module holds no policy. It
//   1. tells the brain, in the Stop hook's stdin, that it is loaded and will
//      act on this very Stop (`loop_killer_mod: {version: 1}`);
//   2. takes the brain's plan back out of the hooks' combined outcome (see
//      takePlan), so that none of it reaches the engine or the model;
//   3. when that turn ends: queues `/goal clear` and records "queued" if the
//      plan asks for it (and shows nothing yet: no promise, only results), else
//      shows the plan's toast and its notice under the answer;
//   4. as the command runs, finds out what happened with the markers the plan
//      gave, shows the plan's one line for that outcome (in `-p` in place of
//      the command's output, which is what `-p` prints; in the terminal UI as
//      a row after the command's own) and its toast, and records it in the
//      JSON file the plan named (held open at session end for `-p`);
//      In a run with no terminal (`claude -p`, the SDK) a turn's `text` is not
//      printed, so there the notice of a stop with no goal to clear is the
//      output of a command of this module's own (NOTICE_COMMAND), queued as
//      the `/goal clear` is: what `-p` prints, in text and json alike;
//   5. tells the brain of tool calls no command hook counts: a call whose input
//      the engine rejects (InputValidationError) raises no PreToolUse,
//      PostToolUse nor PostToolUseFailure, and one the permissions refuse no
//      PostToolUse(Failure) (measured on 2.1.328 and 2.1.332), so a model
//      repeating one would loop for ever. The mod's `tool.call` hears every
//      call: it runs the brain (hooks/launch.py) with the input
//      PostToolUseFailure would have had, and, before a repeat of a call
//      refused before PreToolUse, with PreToolUse's; it hands on the brain's
//      words and its refusal, and ends the turn (`$.turn.abort`) when the
//      brain's answer ends it.
//
// Why the plan does not ride in `stopReason`: all Stop hooks (ours and the
// /goal evaluator) run in parallel, and the outcome `next()` resolves to folds
// their results "last write wins"; the evaluator always sets stopReason and
// usually finishes last, so ours is lost there (measured on 2.1.328).
// `additionalContext` entries are concatenated, one per hook, so an entry of
// ours always survives the fold. Left in, it would be recorded as a
// hook_additional_context attachment, so this module takes it out. Nothing
// else of the outcome is touched: the engine shows the brain's own
// stopReason when the outcome is handed on as it came, and shows "Stop hook
// prevented continuation" once a module rewrites stopReason (also measured).
//
// Why the outcome is read from the transcript: in the terminal UI
// `$.command.run` resolves to `{}` (no text), and the command's output exists
// only as transcript rows. In `-p` it resolves to `{ text }` as well.
//
// Plain JavaScript, no imports, no dependencies. `claude plugin validate`
// insists that `$` be spelled `$.noun.call(...)` or passed to a top-level
// function, hence the flat helpers below.

// The brain's entry in `additionalContext` is this marker followed by JSON.
const MARK = 'loop-killer: '
// Bumped when the stdin flag or the plan change shape.
const PROTOCOL = 1
// How much of the transcript, past the end of the stopped turn, is searched.
const EVIDENCE_BYTES = 1 << 20
// How often the transcript is read again while waiting for the outcome.
const POLL_MS = 100
// How long to wait for the outcome's rows when the plan names no `wait_ms`:
// the transcript lags, and in the terminal UI the command's rows are often
// not on disk yet when `$.command.run` resolves (measured on 2.1.328).
const DEFAULT_WAIT_MS = 3000

// The plan of a loop-killer stop, from its Stop to the end of its turn
// (milliseconds apart). Module state is lost on a hot reload; losing it in
// that window only means no clear runs, which the brain sees as an outcome
// record that never appears.
let pending
// The settling of the last queued clear, awaited when the session ends so
// that a `-p` run does not exit before the outcome is recorded.
let settling
// The plan whose `/goal clear` is queued and not yet run.
let clearing
// The session as the classic events name it ({session_id, transcript_path,
// cwd}): the last heard (a person's prompt starts every turn with one).
let envelope
// The main loop's running turn (its `turn.start` id), for ending it.
let mainTurn
// Whether NOTICE_COMMAND is registered (a session with no terminal), and the
// notice its queued run prints.
let noticeCommand = false
let noticeWaiting
// Tool calls (by tool_use_id) whose classic PreToolUse was raised (`asked`),
// and whose PostToolUse or PostToolUseFailure was (`counted`: the command
// hooks counted the result). Taken off as each call's result comes back.
const asked = new Set()
const counted = new Set()
// A result that is loop-killer's own refusal (the brain's REFUSED_MARK), or the
// person's interruption: nothing to count.
const NOT_COUNTED = ['loop-killer: refused', 'interrupted by user']
// Calls, as the model wrote them, the engine rejected before any command hook
// ran: each repeat of one is rejected the same way, so the brain is asked
// about it, as PreToolUse would ask, before it goes to the engine.
const rejected = new Set()
// Subagents (by agentId) whose run the brain ended: their next model request is
// not sent, and answered with the brain's words instead (`$.turn.abort` ends
// the main loop's turn only), which ends the run.
const ending = new Map()
// Bounds the sets: far beyond the calls of any turn.
const MAX_CALLS = 1000
// The fields `tool.call` adds to the tool's own input.
const CALL_FIELDS = new Set(['tool', 'tool_use_id', 'consent', 'agentId', 'requestMeta'])
// How long the brain may take (a command hook's timeout in hooks.json).
const BRAIN_MS = 30000
// The command whose output is the notice where nothing draws (`-p`, the SDK):
// there the text a turn.complete hook returns is printed nowhere, while a
// queued command's output is what `-p` prints (measured on 2.1.328 and
// 2.1.332). Registered only in such a session: a person at a terminal never
// sees it in the typeahead.
const NOTICE_COMMAND = 'loop-killer-notice'

// Returns `value` when it is a plain object, else an empty one.
function objectOr(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? value : {}
}

// Returns `text` when it is a non-empty string, else undefined.
function textOr(text) {
  return typeof text === 'string' && text !== '' ? text : undefined
}

// Splits the combined Stop outcome into the brain's plan (the last
// well-formed entry of ours in additionalContext) and the outcome to hand on,
// which keeps every other hook's entries and none of ours.
function takePlan(result) {
  let plan
  const others = []
  const entries = Array.isArray(result.additionalContext) ? result.additionalContext : []
  for (const entry of entries) {
    if (typeof entry === 'string' && entry.startsWith(MARK)) {
      try {
        const parsed = JSON.parse(entry.slice(MARK.length))
        if (objectOr(parsed).v === PROTOCOL) plan = parsed
      } catch {
        // A garbled entry of ours: leave it out all the same.
      }
      continue
    }
    others.push(entry)
  }
  const { additionalContext, ...rest } = result
  const answer = others.length > 0 ? { ...rest, additionalContext: others } : rest
  return { plan, answer }
}

// The first status (in the plan's order) one of whose markers is in the
// evidence, or undefined. A line holding the plan's id is an echo of the
// plan itself (the transcript keeps each hook's stdout), whose markers prove
// nothing, so it is left out.
function classify(evidence, plan) {
  const id = textOr(plan.id)
  const lines = evidence.split('\n').filter((line) => id === undefined || !line.includes(id))
  for (const [status, markers] of Object.entries(objectOr(plan.match))) {
    for (const marker of [].concat(markers)) {
      if (textOr(marker) !== undefined && lines.some((line) => line.includes(marker))) return status
    }
  }
  return undefined
}

// The transcript's size now, or 0 when it cannot be read.
async function sizeOf($, path) {
  if (textOr(path) === undefined) return 0
  const stat = await $.fs.stat(path).catch(() => undefined)
  return stat?.size ?? 0
}

// What the transcript gained since `offset`, or "" when it cannot be read.
async function transcriptSince($, path, offset) {
  const size = await sizeOf($, path)
  if (size <= offset) return ''
  const length = Math.min(size - offset, EVIDENCE_BYTES)
  return $.fs.read(path, { offset, length }).catch(() => '')
}

// Writes the outcome record where the plan asked, when it asked. A write
// that fails is told to the debug log and stops nothing else.
async function record($, plan, fields) {
  const path = textOr(plan.outcome_path)
  if (path === undefined) return
  const row = {
    v: PROTOCOL,
    id: plan.id ?? null,
    session_id: plan.session_id ?? null,
    ...fields,
    at: await $.clock.now(),
  }
  await $.fs.write(path, JSON.stringify(row) + '\n').catch((err) => {
    $.ui.log(`outcome record not written to ${path}: ${err}`, { to: 'debug' })
  })
}

// Once `/goal clear` has run: which of the plan's outcomes it was, read from
// the command's own text and the transcript rows written since the turn
// ended, waiting up to `wait_ms` (default DEFAULT_WAIT_MS) for them;
// `unknown` when none showed.
async function outcomeOf($, plan, output) {
  const wait = Number.isFinite(plan.wait_ms) ? Math.max(0, plan.wait_ms) : DEFAULT_WAIT_MS
  const deadline = (await $.clock.now()) + wait
  for (;;) {
    const evidence = `${output}\n${await transcriptSince($, plan.transcript_path, plan.offset)}`
    const status = classify(evidence, plan)
    if (status !== undefined) return status
    if ((await $.clock.now()) >= deadline) return 'unknown'
    await $.clock.sleep(POLL_MS)
  }
}

// What the command printed, on one line: escape sequences and other control
// characters out, blanks folded, cut to the plan's `output_max`.
function oneLine(text, max) {
  const flat = String(text ?? '')
    .replace(/\u001b\[[0-?]*[ -/]*[@-~]/g, ' ')
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
  return Number.isFinite(max) && max > 0 ? flat.slice(0, max) : flat
}

// The plan's one line for a result, with what the command printed in place
// of `{output}` (its `outcome_bare` line when it printed nothing), and the
// plan's toast for that result.
function wordsFor(plan, status, printed) {
  const output = oneLine(printed, plan.output_max)
  const lines = objectOr(output === '' ? plan.outcome_bare : plan.outcome)
  const template = textOr(lines[status]) ?? textOr(objectOr(plan.outcome)[status]) ?? ''
  const line = template.replaceAll('{output}', output).trim()
  const toast = textOr(objectOr(plan.outcome_toast)[status]) ?? line
  return { line, toast }
}

// Settles a plan once: the result of `/goal clear` (ran, or refused with
// `error`) read with the plan's markers, shown as the plan's toast (and, when
// `row`, as a row of its own), and recorded. Returns the line.
async function settle($, plan, ran, error, row) {
  plan.settled = true
  const output = textOr(ran?.text) ?? ''
  const status = error === undefined ? await outcomeOf($, plan, output) : 'failed'
  const { line, toast } = wordsFor(plan, status, error ?? output)
  if (toast !== '') $.ui.toast(toast)
  if (row && line !== '') $.ui.log(line)
  await record($, plan, { status, output: textOr(output) ?? null, error: error ?? null })
  return line
}

// The `/goal clear` this module queued, as it runs: its result becomes the
// plan's one line. Where the command hands its text back (`-p`, the SDK), the
// line takes the place of that text, so the printed result is that one line;
// where it does not (the terminal UI draws its own row, and the proof reaches
// the transcript only after), the line follows as a row once the result is
// known. Any other run of /goal passes through untouched.
async function onGoalCommand($, e, next) {
  const plan = clearing
  if (plan === undefined || plan.settled || e.origin?.kind !== 'plugin' ||
      String(e.args ?? '').trim() !== 'clear') return next(e)
  clearing = undefined
  let ran
  try {
    ran = await next(e)
  } catch (err) {
    const line = await settle($, plan, undefined, String(err?.message ?? err), false)
    return { text: line }
  }
  if (textOr(ran?.text) === undefined) {
    settling = settle($, plan, ran, undefined, true)
      .catch((err) => $.ui.log(`outcome not recorded: ${err}`, { to: 'debug' }))
    return ran
  }
  const line = await settle($, plan, ran, undefined, false)
  return line === '' ? ran : { ...ran, text: line }
}

// Adds `value` to `set`, forgetting the oldest entries past MAX_CALLS.
function remember(set, value) {
  set.add(value)
  for (const old of set) {
    if (set.size <= MAX_CALLS) break
    set.delete(old)
  }
}

// The call as the model wrote it: the tool's name, its input (the event less
// the fields `tool.call` adds) and a key for both.
function callOf(e) {
  const input = {}
  for (const [field, value] of Object.entries(e)) {
    if (!CALL_FIELDS.has(field)) input[field] = value
  }
  const name = String(e.tool)
  return { name, input, key: JSON.stringify([e.agentId ?? '', name, input]) }
}

// Runs the brain as its command hook runs for `event`, with the session's
// envelope and the call; its answer, or {} when it gave none or failed.
async function askBrain($, event, e, call, extra) {
  if (envelope === undefined) return {}
  const input = {
    ...envelope,
    hook_event_name: event,
    tool_name: call.name,
    tool_input: call.input,
    tool_use_id: textOr(e.tool_use_id) ?? '',
    ...(textOr(e.agentId) === undefined ? {} : { agent_id: e.agentId }),
    ...extra,
  }
  try {
    const env = await $.process.hookEnv()
    const launcher = `${env.CLAUDE_PLUGIN_ROOT}/hooks/launch.py`
    const ran = await $.process.run(['python3', launcher],
      { env, stdin: JSON.stringify(input), timeoutMs: BRAIN_MS })
    const text = String(ran.stdout ?? '').trim()
    return text === '' ? {} : objectOr(JSON.parse(text))
  } catch (err) {
    $.ui.log(`${MARK}the hook for a call Claude Code rejected did not run: ${err}`,
      { to: 'debug' })
    return {}
  }
}

// Shows the brain's line for the person (its systemMessage), as Claude Code
// shows a command hook's.
function tellPerson($, said) {
  const line = textOr(said.systemMessage)
  if (line !== undefined) $.ui.log(oneLine(line, 400))
}

// Every tool call: a repeat of a call the engine rejected before is put to
// the brain first (it may refuse it, and end the turn); a failed result no
// command hook counted is told to the brain as PostToolUseFailure.
async function onToolCall($, e, next) {
  const call = callOf(e)
  if (rejected.has(call.key)) {
    const said = await askBrain($, 'PreToolUse', e, call, {})
    const specific = objectOr(said.hookSpecificOutput)
    if (specific.permissionDecision === 'deny') {
      tellPerson($, said)
      if (said.continue === false) {
        if (e.agentId === undefined) endTurn($, specific)
        else if (ending.size < MAX_CALLS) {
          ending.set(e.agentId, textOr(said.stopReason) ?? `${MARK}stopped`)
        }
      }
      return { deny: textOr(specific.permissionDecisionReason) ?? `${MARK}refused` }
    }
  }
  const result = await next(e)
  const wasAsked = asked.delete(e.tool_use_id)
  if (counted.delete(e.tool_use_id) || result?.isError !== true) return result
  const error = String(result.text ?? result.result ?? '')
  if (NOT_COUNTED.some((text) => error.includes(text))) return result
  // A call refused before it ran (its input, or the permissions after PreToolUse)
  // gets no PostToolUse: the brain counts its result here. Only a call refused
  // before PreToolUse too is asked about before its repeats.
  if (!wasAsked) remember(rejected, call.key)
  const said = await askBrain($, 'PostToolUseFailure', e, call, {
    error, is_interrupt: false,
  })
  tellPerson($, said)
  const context = textOr(objectOr(said.hookSpecificOutput).additionalContext)
  if (context === undefined) return result
  const kept = Array.isArray(result.context) ? result.context : []
  return { ...result, context: [...kept, context] }
}

// A failing tool.call hook: the call goes on as if it were not there.
async function onToolCallFailed($, e, next) {
  return next.called ? undefined : next(e)
}

// The brain ended the turn from a PreToolUse it was asked about: keep its
// plan for turn.complete (the notice, /goal clear) and end the main turn.
function endTurn($, specific) {
  const { plan } = takePlan({ additionalContext: [specific.additionalContext] })
  if (plan !== undefined) pending = { ...plan }
  if (mainTurn === undefined) return
  $.turn.abort({ turnId: mainTurn })
    .catch((err) => $.ui.log(`${MARK}the turn could not be ended: ${err}`, { to: 'debug' }))
}

// A model request: one of a subagent the brain ended is answered here, with
// no tool call, so its run ends; every other request goes on untouched.
async function* onStep($, e, next) {
  const said = e.agentId === undefined ? undefined : ending.get(e.agentId)
  if (said === undefined) return yield* next(e)
  ending.delete(e.agentId)
  return { turnId: e.turnId, index: e.index, answer: said, toolUses: [], stopReason: 'end_turn',
    usage: null }
}

// PostToolUse or PostToolUseFailure: its command hooks count this result.
async function onToolCounted($, e, next) {
  if (textOr(e.tool_use_id) !== undefined) remember(counted, e.tool_use_id)
  return next(e)
}

// A person's prompt: the session's envelope, for the brain's input.
async function onPrompt($, e, next) {
  envelope = { session_id: e.session_id, transcript_path: e.transcript_path, cwd: e.cwd }
  return next(e)
}

// The main loop's turn begins: its id, for ending it.
async function onTurnStart($, e, next) {
  const started = await next(e)
  if (e.agentId === undefined) mainTurn = textOr(objectOr(started).turnId)
  return started
}

// Stop: flag the event for the brain, run everything beneath (the Python
// hook, the /goal evaluator, other settings hooks), keep the plan.
async function onStop($, e, next) {
  const result = await next({ ...e, loop_killer_mod: { version: PROTOCOL } })
  const { plan, answer } = takePlan(result)
  // Held only when the turn really ends here.
  if (plan !== undefined && result.preventContinuation === true) {
    pending = { ...plan, session_id: e.session_id, transcript_path: e.transcript_path }
  }
  return answer
}

// PreToolUse: the brain ends the turn here when a refused call is retried once
// too often (its answer says continue: false, which this event's outcome does
// not show; the plan is only given then). Keep the plan, hand on the refusal.
// This event carries no transcript_path: the plan names it.
async function onPreToolUse($, e, next) {
  if (textOr(e.tool_use_id) !== undefined) remember(asked, e.tool_use_id)
  const result = await next(e)
  const { plan, answer } = takePlan(objectOr(result))
  if (plan !== undefined) pending = { ...plan }
  return plan === undefined ? result : answer
}

// If onStop fails after the hooks beneath ran, hand on their outcome without
// our entry, so the brain's plan never reaches the engine or the model.
async function onStopFailed($, e, next) {
  return next.called ? takePlan(await next(e)).answer : undefined
}

// Turn end: act on a plan the Stop left, once, on the main loop only. When a
// clear is queued nothing is shown yet (the words wait for its result);
// otherwise the plan's notice and toast say what is already known.
async function onTurnComplete($, e, next) {
  if (e.agentId !== undefined) return next(e)
  const held = pending
  pending = undefined
  if (held === undefined) return next(e)
  const plan = { ...held, offset: await sizeOf($, held.transcript_path) }
  if (plan.clear_goal === true) {
    // Recorded first, so a quick settle is never overwritten by 'queued'.
    await record($, plan, { status: 'queued', output: null, error: null })
    clearing = plan
    // Queued, not awaited (awaiting here would wait on this very turn): it
    // runs once the session is idle. onGoalCommand settles it as it runs; a
    // build whose commands no hook hears settles it here.
    $.command.run({ command: 'goal', args: 'clear' })
      .then(
        (ran) => (plan.settled ? undefined : (settling = settle($, plan, ran, undefined, true))),
        (err) => (plan.settled ? undefined
          : (settling = settle($, plan, undefined, String(err?.message ?? err), true))),
      )
      .catch((err) => $.ui.log(`outcome not recorded: ${err}`, { to: 'debug' }))
  }
  const notice = textOr(plan.notice)
  if (notice !== undefined && plan.clear_goal !== true && noticeCommand) {
    // Queued before next(e), as the clear is: queued after it, the run was
    // sometimes taken for a re-entry and no hook answered it (2.1.332).
    noticeWaiting = notice
    $.command.run({ command: NOTICE_COMMAND })
      .catch((err) => $.ui.log(`${MARK}the notice was not printed: ${err}`, { to: 'debug' }))
  }
  const toast = textOr(plan.toast)
  if (toast !== undefined) $.ui.toast(toast)
  const ended = await next(e)
  return notice === undefined ? ended : { ...ended, text: notice }
}

// NOTICE_COMMAND as it runs: its output is the notice waiting (none when the
// person ran it), for the person alone (no request carries it).
async function onNoticeCommand($, e, next) {
  const text = noticeWaiting ?? ''
  noticeWaiting = undefined
  return { text, isTextDisplayOnly: true }
}

// Session start: where nothing draws, register NOTICE_COMMAND.
async function onSessionStart($, e, next) {
  if (e.isInteractive === false && !noticeCommand) {
    try {
      await $.command.register({ name: NOTICE_COMMAND,
        description: "loop-killer's notice of the loop it stopped in this run" })
      noticeCommand = true
    } catch (err) {
      $.ui.log(`${MARK}${NOTICE_COMMAND} not registered: ${err}`, { to: 'debug' })
    }
  }
  return next(e)
}

// Session end (exit, /clear, a `-p` run done): let a settle in flight finish
// its record, within the short bound the engine gives this event.
async function onSessionEnd($, e, next) {
  if (settling !== undefined) await settling
  return next(e)
}

export function register(on) {
  on('classic.Stop', onStop).catch(onStopFailed)
  on('classic.PreToolUse', onPreToolUse)
  on('classic.PostToolUse', onToolCounted)
  on('classic.PostToolUseFailure', onToolCounted)
  on('classic.UserPromptSubmit', onPrompt)
  on('turn.start', onTurnStart)
  on('turn.step', onStep)
  on('tool.call', onToolCall).catch(onToolCallFailed)
  on('turn.complete', onTurnComplete)
  on('command.run', { command: 'goal' }, onGoalCommand)
  on('command.run', { command: NOTICE_COMMAND }, onNoticeCommand)
  on('session.start', onSessionStart)
  on('session.end', onSessionEnd)
}
