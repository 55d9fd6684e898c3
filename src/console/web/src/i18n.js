// The console's words in English and Chinese (zh-CN). A key missing in
// one language falls back to English, then to the key itself.
export const messages = {
  en: {
    overview: 'Overview', jobs: 'Jobs', nodes: 'Nodes', queues: 'Queues', sandboxes: 'Sandboxes',
    workflows: 'Workflows', usage: 'Usage', reports: 'Reports', alerts: 'Alerts & events',
    login: 'Log in', logout: 'Log out', token: 'API token or identity-provider JWT',
    login_hint: 'The token is kept in this browser tab only (session storage) and sent to this daemon alone.',
    bad_token: 'The daemon refused this token.',
    pools: 'Pools', capacity: 'Capacity', allocated: 'Allocated', pending: 'Pending', running: 'Running',
    firing: 'Alerts firing', none: 'None', state: 'State', queue: 'Queue', user: 'User', project: 'Project',
    name: 'Name', id: 'ID', submitted: 'Submitted', started: 'Started', ended: 'Ended', filter: 'Filter',
    all: 'All', submit_job: 'Submit a job', command: 'Command (run with /bin/sh -c)', kind: 'Workload kind',
    cpus: 'CPUs', memory_mb: 'Memory (MB)', submit: 'Submit', cancel: 'Cancel', routing: 'Routing',
    pending_reasons: 'Why it waits', estimated_start: 'Estimated start', priority: 'Priority factors',
    attempts: 'Attempts', events: 'Events', log: 'Output (follows while it runs)', exit_code: 'Exit code',
    drain: 'Drain', resume: 'Resume', reason: 'Reason', pool: 'Pool', resources: 'Resources',
    group_by: 'Group by', from: 'From', to: 'To', metric: 'Metric', show: 'Show', download_csv: 'Download CSV',
    capacity_report: 'Capacity', cost_report: 'Cost', pending_report: 'Pending jobs', tasks: 'Tasks',
    graph: 'Graph', counts: 'Task instances', resume_workflow: 'Resume', cancel_workflow: 'Cancel workflow',
    loading: 'Loading…', error: 'Error', job: 'Job', node: 'Node', image: 'Image', created: 'Created',
    kind_col: 'Kind', severity: 'Severity', message: 'Message', time: 'Time', object: 'Object',
    up: 'up', drained: 'drained', down: 'down', language: 'Language', no_rows: 'Nothing to show.',
    admin_only: 'Platform-admins only.', headroom: 'Headroom', utilisation: 'Utilisation', idle: 'Idle nodes',
    unit_cost: 'Unit cost', top: 'Top spenders', longest: 'Longest waits', count: 'Count',
    predicted_run: 'Predicted run (s)', cpu_hours: 'CPU-hours', gpu_hours: 'GPU-hours',
    instance_minutes: 'Instance-minutes', storage_gb_hours: 'Storage GB-hours', cost: 'Cost',
    target: 'Target ceiling', resource: 'Resource', peak: 'Peak', average: 'Average', meets_target: 'Meets target',
    share_of_nodes: 'Share of nodes', share_of_busy: 'Share of busy nodes', target_share: 'Target share',
    idle_since: 'Idle since', idle_for: 'Idle for', job_usage: 'Usage (ledger)',
    total_cost: 'Total cost', cost_per_job: 'Cost per job', cost_per_cpu_hour: 'Per CPU-hour',
    cost_per_gpu_hour: 'Per GPU-hour', cost_per_instance_minute: 'Per instance-minute',
    top_projects: 'Top projects', top_users: 'Top users', share: 'Share', waiting_total: 'Jobs waiting',
    longest_wait: 'Longest wait', waited: 'Waiting for', policy: 'Policy', limits: 'Settings', after: 'After',
    task: 'Task',
  },
  'zh-CN': {
    overview: '总览', jobs: '作业', nodes: '节点', queues: '队列', sandboxes: '沙箱',
    workflows: '工作流', usage: '用量', reports: '报表', alerts: '告警与事件',
    login: '登录', logout: '退出', token: 'API 令牌或身份提供方 JWT',
    login_hint: '令牌只保存在此浏览器标签页中（会话存储），只发送给本守护进程。',
    bad_token: '守护进程拒绝了该令牌。',
    pools: '资源池', capacity: '容量', allocated: '已分配', pending: '排队', running: '运行中',
    firing: '正在触发的告警', none: '无', state: '状态', queue: '队列', user: '用户', project: '项目',
    name: '名称', id: '编号', submitted: '提交时间', started: '开始时间', ended: '结束时间', filter: '筛选',
    all: '全部', submit_job: '提交作业', command: '命令（以 /bin/sh -c 运行）', kind: '负载类型',
    cpus: 'CPU 核数', memory_mb: '内存（MB）', submit: '提交', cancel: '取消', routing: '路由',
    pending_reasons: '等待原因', estimated_start: '预计开始', priority: '优先级因子',
    attempts: '尝试', events: '事件', log: '输出（运行时实时跟随）', exit_code: '退出码',
    drain: '排空', resume: '恢复', reason: '原因', pool: '资源池', resources: '资源',
    group_by: '分组', from: '起始', to: '截止', metric: '指标', show: '显示', download_csv: '下载 CSV',
    capacity_report: '容量', cost_report: '成本', pending_report: '排队作业', tasks: '任务',
    graph: '图', counts: '任务实例', resume_workflow: '继续', cancel_workflow: '取消工作流',
    loading: '加载中…', error: '错误', job: '作业', node: '节点', image: '镜像', created: '创建时间',
    kind_col: '类型', severity: '级别', message: '消息', time: '时间', object: '对象',
    up: '正常', drained: '已排空', down: '离线', language: '语言', no_rows: '没有可显示的内容。',
    admin_only: '仅平台管理员可见。', headroom: '余量', utilisation: '利用率', idle: '空闲节点',
    unit_cost: '单位成本', top: '花费最多', longest: '等待最久', count: '数量',
    predicted_run: '预测运行时长（秒）', cpu_hours: 'CPU 核时', gpu_hours: 'GPU 卡时',
    instance_minutes: '实例分钟', storage_gb_hours: '存储 GB·小时', cost: '费用',
    target: '目标上限', resource: '资源', peak: '峰值', average: '平均', meets_target: '满足目标',
    share_of_nodes: '节点占比', share_of_busy: '忙碌节点占比', target_share: '目标占比',
    idle_since: '空闲起始', idle_for: '已空闲', job_usage: '用量（账本）',
    total_cost: '总费用', cost_per_job: '每作业费用', cost_per_cpu_hour: '每 CPU 核时',
    cost_per_gpu_hour: '每 GPU 卡时', cost_per_instance_minute: '每实例分钟',
    top_projects: '费用最高的项目', top_users: '费用最高的用户', share: '占比', waiting_total: '等待中的作业',
    longest_wait: '最长等待', waited: '已等待', policy: '策略', limits: '设置', after: '依赖于',
    task: '任务',
  },
};

let current = 'en';

export function setLanguage(lang) {
  current = messages[lang] ? lang : 'en';
  document.documentElement.lang = current;
}

export function language() {
  return current;
}

export function t(key) {
  return (messages[current] && messages[current][key]) || messages.en[key] || key;
}
