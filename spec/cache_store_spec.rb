# The response cache's storage (docs/cache.md, "Storage"; cache_store.c,
# cache_loader.c) over real sockets against the real binary: a zone kept
# across a reload, rebuilt from its files after a restart, LRU eviction by
# max_size, a cache file replaced by another key's. The location is a Ruby
# handler whose every answer is unique, so a body tells a hit from a miss.
require_relative 'spec_helper'

RSpec.describe 'response cache storage' do
  FILE_BODY = 200_000 # bytes: over 64 KiB, so into a file (a name of its own: spec constants share one namespace)

  let(:dir) { File.join(spec_dir, 'cache') }

  def start_cache(max_size: nil)
    prelude = %(cache :api, memory: "8m", path: "#{dir}"#{max_size ? %(, max_size: "#{max_size}") : ''})
    gateway_with(<<~'RUBY', prelude)
      location "/r", cache: { zone: :api, valid: { 200 => 600 } } do |req|
        n = req.query.to_s[/size=(\d+)/, 1].to_i
        "#{Time.now.to_f} #{rand(1 << 30)} ".ljust(n, "x")
      end
    RUBY
  end

  def get(size, key = 'k')
    r = http_get(@port, "/r?size=#{size}&key=#{key}")
    expect(r.status).to eq(200)
    [r['X-Cache-Status'], r.body]
  end

  def cache_files
    Dir[File.join(dir, '[0-9a-f][0-9a-f]', '*')]
  end

  it 'keeps its entries, in memory and in files, across a reload' do
    start_cache
    _, small = get(100)
    _, big = get(FILE_BODY)
    expect(get(100)).to eq(['HIT', small])
    old_worker = worker_pid
    @gw.signal('HUP')
    poll('a new worker after the reload') { (worker_pid rescue old_worker) != old_worker }
    expect(get(100)).to eq(['HIT', small])
    expect(get(FILE_BODY)).to eq(['HIT', big])
    expect(@gw.log).not_to match(/entries loaded/)
  end

  it 'rebuilds its index from the files at start (entries whose body was in memory are gone)' do
    start_cache
    _, small = get(100)
    _, big = get(FILE_BODY)
    expect(cache_files.size).to eq(1)
    @gw.stop
    @gw = start_gateway(File.read(@gw.config_path), ports: [@port])
    expect(@gw.log).to match(/cache api: 1 entries loaded from #{Regexp.escape(dir)}/)
    status, body = get(FILE_BODY)
    expect([status, body.bytesize, body == big]).to eq(['HIT', FILE_BODY, true])
    status, body = get(100)
    expect([status, body == small]).to eq(['MISS', false])
  end

  it 'evicts the least recently used files past max_size' do
    start_cache(max_size: '500k')
    _, a = get(FILE_BODY, 'a')
    _, b = get(FILE_BODY, 'b')
    expect(get(FILE_BODY, 'a')).to eq(['HIT', a]) # a is now the most recently used
    get(FILE_BODY, 'c')                            # 3 x 200 KB > 500k: b goes
    expect(cache_files.size).to eq(2)
    expect(get(FILE_BODY, 'a')).to eq(['HIT', a])
    status, body = get(FILE_BODY, 'b')
    expect([status, body == b]).to eq(['MISS', false])
  end

  it "never serves another key's file put in place of a key's own" do
    start_cache
    _, a = get(FILE_BODY, 'a')
    _, b = get(FILE_BODY, 'b')
    files = cache_files
    expect(files.size).to eq(2)
    a_file = files.find { |f| File.binread(f).include?('key=a') }
    b_file = files.find { |f| f != a_file }
    FileUtils.cp(b_file, "#{a_file}.new")
    File.rename("#{a_file}.new", a_file) # b's valid file under a's name
    status, body = get(FILE_BODY, 'a')
    expect(status).to eq('MISS')
    expect([body == a, body == b]).to eq([false, false])
    poll('a log line about the file') { @gw.log.include?("#{a_file}: replaced underneath; a miss") }
    expect(get(FILE_BODY, 'b')).to eq(['HIT', b])
  end
end
