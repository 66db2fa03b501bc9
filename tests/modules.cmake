# The test index: every test carries the label of the module it tests, so `ctest -L sim`
# runs the simulator's tests and a newcomer finds a module's tests by its
# name (docs/testing.md has the table). Included after the other fragments:
# labels are appended, never replacing `threads`, `fuzz` or `multihost`.
set(KT_TEST_MODULES
  "schedule:test_schedule_io test_validate test_program_order test_torch_interop test_torch_ir test_torch_cli"
  "sim:test_sim test_sim_metrics test_sim_window test_sim_par test_step test_sim_scale test_sim_threads test_bubble test_closed_forms test_idle_split test_critical"
  "costs:test_links test_cost_basis"
  "generators:test_zero_bubble test_memory_schedules test_memory_cli test_oracles test_schedule_span test_optimal test_optimal_mb"
  "request:test_request test_doors test_mb_costs test_packing"
  "plan:test_plan_cli test_plan_memory test_plan_partition test_plan_property test_plan_search test_plan_spec"
  "nn:test_gpt_kernels test_gpt_fused test_gemm_cli test_gpt_model test_mlp_grad test_data test_kernel_codegen"
  "transport:test_transport test_threads_allreduce test_doorbell test_inbox test_mpi test_multihost"
  "runtime:test_replan test_runtime test_gpt_runtime test_gpt_packed test_gpt_seq_chunks test_post_validation test_slow_rank test_idle_core_wait test_idle_straggler test_idle_comm"
  "train:test_train_replan test_autopilot test_autopilot_detect test_gpt_train test_step_sync test_checkpoint test_train_cli test_gpt_cli test_train_safety test_faults test_calibrate test_resume_safety test_stop_signals"
  "report:test_gantt test_html test_run_report test_report_html test_report_run test_report_screenshot test_report_extremes test_readers test_users_report"
  "serve:test_serve test_serve_cli test_serve_browser test_live_view test_serve_attacks test_serve_latest test_users_serve test_users_live test_users_memory test_users_gantt"
  "web:test_whatif_fault test_web test_whatif_panel test_whatif_critical test_whatif_drag test_whatif_diff test_whatif_idle test_whatif_packing"
  "cli:test_cli test_bad_input test_edges test_output_paths test_install test_users_cli test_readme"
  "ffi:test_ffi test_python_api test_python_edges test_python_install test_torch_varlen test_torch_errors"
  "fuzz:fuzz_replay_schedule fuzz_replay_config_json fuzz_replay_checkpoint fuzz_replay_cli fuzz_replay_rundir fuzz_replay_http fuzz_replay_ffi")
foreach(entry ${KT_TEST_MODULES})
  string(REPLACE ":" ";" parts "${entry}")
  list(GET parts 0 module)
  list(GET parts 1 names)
  string(REPLACE " " ";" names "${names}")
  foreach(t ${names})
    list(APPEND KT_LABELLED_TESTS ${t})
    if(TEST ${t})
      set_property(TEST ${t} APPEND PROPERTY LABELS ${module})
    endif()
  endforeach()
endforeach()
