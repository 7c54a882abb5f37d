// Types of the JSON the server sends (API.md describes them); no code, only JSDoc for tsc. Loaded on the page's main thread.
// Kept in step with the server's structs (crates/dash/src/status.rs and what they hold) by the
// test answers_and_frames_match_the_page_types in crates/dash/tests/server.rs.
// @ts-check

/**
 * One thread's columns in a frame (one entry per buffer).
 * @typedef {object} ThreadColumns
 * @property {number[]} sines active sines processed
 * @property {number[]} cpu CPU it ended its work on, -1 unknown
 * @property {number[]} wake_us period start to running, µs; -1 no record
 * @property {number[]} busy_us its real work, µs
 */

/**
 * Running counts since the dashboard started.
 * @typedef {object} Counts
 * @property {number} buffers
 * @property {number} dropouts
 * @property {number} ring_drops
 * @property {number} skipped_periods
 * @property {number} device_xruns
 * @property {number} audio_starts
 * @property {number} frames
 * @property {number} frames_dropped
 */

/**
 * @typedef {object} PowerSample
 * @property {number} watts
 * @property {boolean} estimated
 */

/**
 * A telemetry frame: every buffer since the previous frame, in columns.
 * @typedef {object} Frame
 * @property {'frame'} type
 * @property {number} seq
 * @property {number} t server time now, ms since the dashboard started
 * @property {number} buffer_ms
 * @property {number[]} ts period start of each buffer, ms
 * @property {number[]} load % of the buffer duration
 * @property {number[]} dropout 1 = dropout
 * @property {Array<[number, number, number]>} drops `[ts_ms, epoch, seq]` of each dropout
 * @property {number[]} active sines sounding
 * @property {ThreadColumns[]} threads slot 0 is the driver
 * @property {number|null} input_peak
 * @property {boolean} burst
 * @property {Counts} counts
 * @property {number} config_version
 * @property {PowerSample|null} power
 * @property {number[]|null} freq_khz 0 = unknown
 * @property {number|null} idle_entries idle-state entries on all CPUs since start, every few seconds
 */

/**
 * Sent to one page when it fell behind and lost frames.
 * @typedef {object} LaggedNote
 * @property {'lagged'} type
 * @property {number} dropped_frames
 */

/**
 * What the kernel did with one request (xrunlab-sys Outcome).
 * @typedef {{status: 'not_requested'} | {status: 'applied', detail: string} | {status: 'refused', reason: string, fallback: string} | {status: 'unsupported', reason: string}} Outcome
 */

/**
 * @typedef {object} SchedReport
 * @property {number} tid
 * @property {string} obtained
 * @property {Outcome} priority
 * @property {Outcome} deadline
 * @property {Outcome} uclamp
 * @property {Outcome} affinity
 */

/**
 * @typedef {object} ThreadInfo
 * @property {number} index 0 = driver
 * @property {'driver'|'worker'} role
 * @property {number} tid
 * @property {SchedReport} sched
 */

/**
 * @typedef {object} DeviceInfo
 * @property {string} kind
 * @property {string} name
 * @property {number} sample_rate
 * @property {number} buffer_frames
 * @property {boolean} can_set_sample_rate
 * @property {boolean} can_set_buffer
 * @property {string} driver_thread
 * @property {boolean} driver_thread_is_ours
 * @property {string[]} notes
 */

/**
 * @typedef {object} BusyConfig
 * @property {number} count
 * @property {number} period_ms
 * @property {number} duty_pct
 */

/**
 * @typedef {object} RtConfig
 * @property {number|null} priority
 * @property {'fifo'|'round_robin'} policy
 * @property {boolean} deadline
 * @property {number} deadline_runtime_pct
 * @property {number} uclamp_min
 * @property {number[]|null} cpus
 * @property {boolean} pin
 * @property {boolean} mlock
 * @property {boolean} pm_qos
 */

/**
 * The engine's settings (EngineConfig).
 * @typedef {object} Config
 * @property {number} sample_rate
 * @property {number} buffer_frames
 * @property {'apl'|'apl-2020'} chord
 * @property {number} chords
 * @property {number} sines
 * @property {number} burst_sines
 * @property {'reference'|'fast'} kernel
 * @property {number} chunk_size
 * @property {number} threads
 * @property {'processes_sines'|'waits_for_workers'} driver_mode
 * @property {number} min_load_pct
 * @property {number} driver_spin_us
 * @property {number} kernel_slowdown a test hook: the kernel costs this many times as much (1 = off)
 * @property {BusyConfig} busy
 * @property {boolean} work_interval
 * @property {RtConfig} rt
 * @property {boolean} input
 */

/**
 * @typedef {object} CpuInfo
 * @property {number} id
 * @property {string|null} core_type
 * @property {number|null} capacity
 * @property {string|null} governor
 * @property {number|null} cur_freq_khz
 * @property {number|null} min_freq_khz
 * @property {number|null} max_freq_khz
 */

/**
 * Where a CPU sits (GET /api/status).
 * @typedef {object} CpuTopology
 * @property {number} id
 * @property {number|null} package_id
 * @property {number|null} cluster_id
 * @property {number|null} core_id
 * @property {number[]} smt_siblings
 * @property {string|null} core_type
 * @property {number|null} capacity
 */

/**
 * One idle state's entries since the dashboard started.
 * @typedef {object} IdleUsage
 * @property {number} cpu
 * @property {number} index
 * @property {string} name
 * @property {number|null} latency_us
 * @property {number} entries
 * @property {number} time_us
 */

/**
 * The chord in play (GET /api/status).
 * @typedef {object} ChordInfo
 * @property {string} name
 * @property {number[]} notes
 * @property {number} partials_per_chord
 * @property {number} apl_chords AudioPerfLab plays the chord once per physical core
 * @property {number} apl_max_sines
 * @property {number} max_sines
 * @property {number} extra_copies_built xrunlab's own copies beyond AudioPerfLab's range
 * @property {number} extra_copies_in_play
 */

/**
 * The ranges of the controls: the engine's table, and the sine maxima at the current chord and rate.
 * @typedef {object} Limits
 * @property {number} sines_max all sines accepted, xrunlab's own extra chord copies included
 * @property {number} sines_apl_max AudioPerfLab's maximum: one chord per physical core
 * @property {[number, number]} sines 0..=sines_max, for sines and burst sines
 * @property {number|null} priority_default offered when real-time scheduling is turned back on
 * @property {[number, number]} trace_seconds
 * @property {[number, number]} sample_rate
 * @property {number[]} sample_rates offered in the menu
 * @property {[number, number]} buffer_frames
 * @property {number[]} buffer_sizes offered in the menu
 * @property {[number, number]} chords
 * @property {[number, number]} threads
 * @property {[number, number]} chunk_size
 * @property {[number, number]} min_load_pct
 * @property {[number, number]} driver_spin_us
 * @property {[number, number]} kernel_slowdown
 * @property {[number, number]} busy_count
 * @property {[number, number]} busy_period_ms
 * @property {[number, number]} busy_duty_pct
 * @property {[number, number]} priority
 * @property {[number, number]} deadline_runtime_pct
 * @property {[number, number]} uclamp_min
 * @property {[number, number]} stall_ms
 * @property {[number, number]} stall_every_ms
 */

/**
 * The stalls being injected (GET /api/fault).
 * @typedef {object} FaultView
 * @property {number} stall_ms 0 = off
 * @property {number|null} every_ms
 */

/**
 * GET /api/status.
 * @typedef {object} Status
 * @property {string} audio "running" or why not
 * @property {string[]} devices
 * @property {DeviceInfo} [device]
 * @property {Config} [config]
 * @property {string} [preset]
 * @property {ThreadInfo[]} [threads]
 * @property {{mlock: Outcome, pm_qos: Outcome}} [process_rt]
 * @property {number} [busy_threads]
 * @property {ChordInfo} [chord]
 * @property {number|null} [server_load_pct] a server device's own DSP load
 * @property {Limits} [limits]
 * @property {Counts} counts
 * @property {{source: string, estimated: boolean, last: PowerSample|null}} power
 * @property {CpuInfo[]} cpus
 * @property {CpuTopology[]} topology
 * @property {{driver: string|null, states: IdleUsage[], note: string}} idle
 * @property {{available: boolean, note: string}} freq
 * @property {FaultView} fault
 * @property {{enabled: boolean, available: boolean|null, unavailable: string|null}} explain
 * @property {number} config_version
 * @property {string|null} last_error
 */

/**
 * GET /api/config, and PUT's answer (with `restarted`).
 * @typedef {Config & {preset: 'standard'|'optimal'|'custom', device: string, restarted?: boolean}} ConfigView
 */

/**
 * POST /api/burst's answer.
 * @typedef {object} BurstAnswer
 * @property {number} burst_sines
 * @property {number} seconds
 */

/**
 * Who took time from an audio thread (a task, an IRQ or a softirq; an idle CPU never is).
 * @typedef {object} Culprit
 * @property {'task'|'irq'|'softirq'} kind
 * @property {string} name
 * @property {number|null} pid
 * @property {number|null} tid
 * @property {number|null} irq
 * @property {string} policy
 * @property {string[]} earlier_names
 * @property {{pid: number, name: string, policy: string}|null} parent
 * @property {number} cpu
 * @property {number} us
 * @property {number} count
 */

/**
 * The steal case of IdleCause below.
 * @typedef {{case: 'steal', cpu: number, steal_us: number, span_ms: number}} IdleSteal
 */
/**
 * @typedef {{case: 'idle_exit', cpu: number, state: string, exit_latency_us: number}} IdleExit
 */
/**
 * @typedef {{case: 'unexplained', cpu: number}} IdleUnexplained
 */
/**
 * Why a thread waited on an idle CPU (xrunlab-trace IdleCause, tagged by `case`).
 * @typedef {IdleSteal|IdleExit|IdleUnexplained} IdleCause
 */

/**
 * One audio thread's account of a late buffer.
 * @typedef {object} ThreadBlame
 * @property {string} role
 * @property {number} tid
 * @property {number[]} cpus
 * @property {number|null} woken_at_us
 * @property {boolean} wake_inferred
 * @property {boolean} busy_at_period_start
 * @property {number} waited_us
 * @property {Culprit[]} ran_instead
 * @property {number} idle_wait_us
 * @property {IdleCause|null} idle_cause
 * @property {Culprit[]} interrupts
 * @property {number} interrupt_us
 * @property {number} ran_us
 * @property {number} not_preempted_us
 * @property {number|null} median_us
 * @property {number|null} cpu_khz
 * @property {Array<{at_us: number, from_cpu: number, to_cpu: number}>} migrations
 * @property {Array<{at_us: number, us: number, state: string, woken_by: string|null, waited_for_audio_thread: boolean}>} sleeps
 * @property {number} wait_accounted
 * @property {number} unseen_switch_ins
 */

/**
 * Why one buffer was late (xrunlab-trace BlameCard).
 * @typedef {object} BlameCard
 * @property {string} verdict
 * @property {'waited'|'interrupts'|'ran_long'|'blocked'|'woke_late'|'started_late'|'unexplained'} cause
 * @property {string|null} thread
 * @property {Culprit|null} main_culprit
 * @property {number} cause_us
 * @property {number} late_by_us
 * @property {ThreadBlame[]} threads
 * @property {number} lost_events
 * @property {boolean} window_complete
 */

/**
 * GET /api/dropouts/{epoch}/{seq}.
 * @typedef {object} Dropout
 * @property {number} epoch
 * @property {number} seq
 * @property {number} period_start_ns
 * @property {number} late_by_us
 * @property {string} kind
 * @property {string[]} notes
 * @property {BlameCard|null} blame
 * @property {string|null} no_card
 */

/**
 * A culprit's totals over the time explain was on.
 * @typedef {object} CulpritTotal
 * @property {'task'|'irq'|'softirq'} kind
 * @property {string} name
 * @property {number|null} pid
 * @property {number|null} tid
 * @property {number|null} irq
 * @property {string} policy
 * @property {string[]} earlier_names
 * @property {{pid: number, name: string, policy: string}|null} parent
 * @property {number} processes
 * @property {number} stolen_us
 * @property {number} dropouts
 * @property {number} main_culprit_of
 * @property {number} max_us
 */

/**
 * GET/PUT /api/explain (only `enabled` when it is off).
 * @typedef {object} ExplainView
 * @property {boolean} enabled
 * @property {boolean} [available]
 * @property {string|null} [unavailable]
 * @property {object|null} [tracer] what the tracer set up (shown raw)
 * @property {object|null} [stats] the tracer's counters (shown raw)
 * @property {number[]} [cpus]
 * @property {number} [lost_events]
 * @property {number} [dropouts]
 * @property {number} [cards]
 * @property {number} [without_card]
 * @property {number} [kept]
 * @property {number} [forgotten]
 * @property {number} [max_kept]
 * @property {string} [card_rate_limit]
 * @property {string} [median_estimator]
 * @property {CulpritTotal[]} [top_culprits]
 * @property {Array<{epoch: number, seq: number, t_ms: number, kind: string, late_by_us: number, verdict: string, cause: string|null}>} [recent]
 */

/**
 * GET /api/trace?seconds=N, downloaded: the Chrome JSON trace and what it covers.
 * @typedef {object} TraceDownload
 * @property {Blob} blob the JSON document
 * @property {string} filename from Content-Disposition
 * @property {number} coveredSeconds seconds it really covers (X-Xrunlab-Trace-Seconds)
 */

/**
 * A refused request's body.
 * @typedef {object} ApiErrorBody
 * @property {string} error
 * @property {string} [field]
 * @property {string} [path]
 * @property {string} [value]
 * @property {string} [allowed]
 */

/**
 * One xrun of the flight recorder's history, without its card (GET /api/history).
 * @typedef {object} HistoryXrunHead
 * @property {number} id
 * @property {number} time_ns when its cycle started, ns since the Unix epoch
 * @property {string} server
 * @property {string|null} node the late node
 * @property {string} kind the card's kind (node_ran_long, driver_woke_late…)
 * @property {string} root
 * @property {string|null} culprit
 * @property {string} summary the card in one line
 * @property {boolean} has_snapshot
 */

/**
 * A drift event: something changed on the machine.
 * @typedef {object} HistoryDrift
 * @property {number} id
 * @property {number|null} session
 * @property {number} time_ns
 * @property {string} kind
 * @property {string} subject
 * @property {string} before
 * @property {string} after
 * @property {string} words
 */

/**
 * A time the recorder saw no server.
 * @typedef {object} HistoryGap
 * @property {string} server
 * @property {number} from_ns
 * @property {number|null} to_ns null while it is away
 * @property {string} reason
 */

/**
 * @typedef {object} HistoryFacet
 * @property {string} value
 * @property {number} xruns
 */

/**
 * @typedef {object} HistoryFacets
 * @property {HistoryFacet[]} nodes
 * @property {HistoryFacet[]} culprits
 * @property {HistoryFacet[]} kinds
 */

/**
 * GET /api/history with a history to read.
 * @typedef {object} HistoryView
 * @property {boolean} available true
 * @property {string} db
 * @property {number|null} since_ns
 * @property {number|null} until_ns
 * @property {number} now_ns
 * @property {number} limit
 * @property {number} matching every xrun that matches; `xruns` are the latest `limit`
 * @property {boolean} truncated
 * @property {HistoryXrunHead[]} xruns
 * @property {number} drift_matching
 * @property {boolean} drift_truncated
 * @property {HistoryDrift[]} drift
 * @property {HistoryGap[]} gaps
 * @property {HistoryFacets} facets
 */

/**
 * GET /api/history with no history to read.
 * @typedef {object} HistoryMissing
 * @property {boolean} available false
 * @property {string|null} db
 * @property {string} why
 * @property {string} how how to start recording
 */

/** @typedef {HistoryView | HistoryMissing} HistoryAnswer */

/**
 * GET /api/history/xruns/{id}: one xrun with its whole card (watch's card, with
 * `drift_before`).
 * @typedef {object} HistoryXrun
 * @property {number} id
 * @property {number|null} session
 * @property {boolean} has_snapshot
 * @property {number} time_ns
 * @property {string} server
 * @property {string|null} node
 * @property {string} kind
 * @property {string} root
 * @property {string|null} culprit
 * @property {string} summary
 * @property {any} card
 */

export {};
