# The Debian package (loaded by the Rakefile; docs/package.md).
#
#   rake deb            build/deb/gateway_VERSION_amd64.deb with dpkg-buildpackage
#                       (debian/), then lintian on it
#   rake test:package   install it in a fresh debootstrap'ed bookworm and use it
#                       as a new user would (tools/package/test.sh)
#
# The package is built from a copy of the tree (the files git tracks or
# would track: no build/), in build/deb/src/, so dpkg-buildpackage writes
# its .deb, .buildinfo and .changes under build/deb/ and never beside the
# checkout. mruby is compiled from Debian's source package that setup.sh
# fetched (GATEWAY_MRUBY_SRC); a copy of build/mruby/host, when there is
# one with the same inputs, saves compiling it again (tools/mruby/mruby.rb
# rebuilds it when they differ). Nothing is downloaded.
require 'fileutils'

module GatewayPackage
  DEB_DIR = 'build/deb'

  def self.version
    File.read('debian/changelog')[/\Agateway \(([^)]+)\)/, 1] or raise 'debian/changelog: no version'
  end

  def self.deb
    "#{DEB_DIR}/gateway_#{version}_amd64.deb"
  end

  def self.check_version!
    gw = File.read('gateway/base/version.h')[/GW_VERSION "([^"]+)"/, 1]
    return if gw == version
    abort "rake deb: debian/changelog says #{version}, gateway/base/version.h #{gw}: make them agree"
  end

  def self.stage
    src = "#{DEB_DIR}/src/gateway-#{version}"
    FileUtils.rm_rf("#{DEB_DIR}/src")
    FileUtils.mkdir_p(src)
    files = IO.popen(%w[git ls-files -z --cached --others --exclude-standard], &:read).split("\0")
    files.reject! { |f| f.start_with?('build/') || !File.exist?(f) }
    files.each do |f|
      FileUtils.mkdir_p(File.join(src, File.dirname(f)))
      FileUtils.cp(f, File.join(src, f), preserve: true)
    end
    if File.exist?('build/mruby/host/lib/libmruby.a')
      FileUtils.mkdir_p("#{src}/build/mruby")
      FileUtils.cp_r('build/mruby/host', "#{src}/build/mruby/host", preserve: true)
      # Its flags name its folder: the copy's, so nothing reads the checkout's.
      mak = "#{src}/build/mruby/host/lib/libmruby.flags.mak"
      File.write(mak, File.read(mak).gsub(File.expand_path('build/mruby'), File.expand_path("#{src}/build/mruby")))
    end
    src
  end
end

desc "Build #{GatewayPackage::DEB_DIR}/gateway_VERSION_amd64.deb (dpkg-buildpackage, debian/) and run lintian on it"
task :deb do
  GatewayPackage.check_version!
  started = Time.now
  src = GatewayPackage.stage
  env = { 'GATEWAY_MRUBY_SRC' => File.expand_path(Gateway::MRubyBuild.src) }
  log = File.expand_path("#{GatewayPackage::DEB_DIR}/build.log")
  puts "deb: dpkg-buildpackage in #{src} (log: #{log})"
  # -nc: the copy is fresh; cleaning would drop the reused mruby build.
  ok = system(env, 'dpkg-buildpackage', '-b', '-us', '-uc', '-nc', chdir: src, out: log, err: %i[child out])
  unless ok
    puts File.readlines(log).last(40).join
    abort "deb: dpkg-buildpackage failed (#{log})"
  end
  deb = GatewayPackage.deb
  FileUtils.mv(File.join(File.dirname(src), File.basename(deb)), deb)
  printf("deb: %s, %.1f MB (installed %s KiB), built in %.0f s\n", deb, File.size(deb) / 1e6,
         `dpkg-deb -f #{deb} Installed-Size`.strip, Time.now - started)
  puts 'deb: lintian'
  sh 'lintian', '--display-level', '>=warning', deb do |ok2, _|
    abort 'deb: lintian found errors' unless ok2
  end
end

namespace :test do
  desc 'Install the .deb in a fresh debootstrap\'ed bookworm and use it as a new user would (tools/package/test.sh)'
  task package: :deb do
    sh 'tools/package/test.sh', GatewayPackage.deb
  end
end
