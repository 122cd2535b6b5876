// Every series the gateway and the agent expose (test/metrics.test.ts checks a real scrape has them).
export const GATEWAY_SERIES = [
  'oversell_webhook_request_duration_seconds', 'oversell_decisions_total', 'oversell_samples_received_total',
  'oversell_node_status_writes_total', 'oversell_node_granted_ratio', 'oversell_node_applied_ratio', 'oversell_node_raw_allocatable',
  'oversell_node_requests_over_cap', 'oversell_webhook_untouched_total',
  'oversell_agents_connected', 'oversell_node_sample_age_seconds', 'oversell_auth_refusals_total', 'oversell_ingest_thread_heap_bytes',
  'oversell_pod_webhook_request_duration_seconds', 'oversell_sidecar_injections_total', 'oversell_sidecar_refusals_total', 'oversell_sidecar_templates',
  'oversell_gateway_process_cpu_seconds_total', 'oversell_gateway_process_resident_memory_bytes', 'oversell_gateway_nodejs_eventloop_lag_seconds',
  'oversell_event_loop_delay_seconds', 'oversell_overloaded', 'oversell_overloaded_seconds_total', 'oversell_agent_send_every_seconds', 'oversell_agent_min_sample_interval_seconds', 'oversell_shed_total',
  'oversell_webhook_refused_total', 'oversell_relief_total', 'oversell_harm_pods_total', 'oversell_harm_budget_spent',
  'oversell_harm_cpu_observed_seconds_total', 'oversell_harm_cpu_over_capacity_seconds_total', 'oversell_harm_pressure_full_seconds_total', 'oversell_harm_cpu_throttled_seconds_total',
];
export const AGENT_SERIES = [
  'oversell_agent_sampling_duration_seconds', 'oversell_agent_samples_total', 'oversell_agent_stream_reconnects_total',
  'oversell_agent_gateways_connected', 'oversell_agent_process_cpu_seconds_total', 'oversell_agent_process_resident_memory_bytes',
  'oversell_agent_nodejs_eventloop_lag_seconds',
];

